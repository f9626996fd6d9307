"""`available_memory_mib` and `require_memory`: a container's limit wins over the machine's memory, and a
run that would not fit is refused in one sentence before it starts."""

from __future__ import annotations

import pytest

from openenv_lab.machine import NotEnoughMemory, available_memory_mib, require_memory

GIB = 1 << 30


def _meminfo(tmp_path, available_kib: int):
    path = tmp_path / "meminfo"
    path.write_text(f"MemTotal: 99999999 kB\nMemFree: 1 kB\nMemAvailable: {available_kib} kB\n")
    return path


def test_a_cgroup_v2_limit_below_the_machines_memory_is_what_is_left(tmp_path):
    (tmp_path / "memory.max").write_text(f"{2 * GIB}\n")
    (tmp_path / "memory.current").write_text(f"{3 * GIB // 2}\n")
    free = available_memory_mib(tmp_path, _meminfo(tmp_path, 16 * 1024 * 1024))
    assert free == 512


def test_a_cgroup_v1_limit_counts_and_its_no_limit_value_does_not(tmp_path):
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text(f"{GIB}\n")
    (tmp_path / "memory" / "memory.usage_in_bytes").write_text(f"{GIB // 4}\n")
    assert available_memory_mib(tmp_path, _meminfo(tmp_path, 8 * 1024 * 1024)) == 768
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # no limit
    assert available_memory_mib(tmp_path, _meminfo(tmp_path, 8 * 1024 * 1024)) == 8 * 1024


def test_no_limit_in_cgroup_v2_leaves_the_machines_memory(tmp_path):
    (tmp_path / "memory.max").write_text("max\n")
    (tmp_path / "memory.current").write_text(f"{GIB}\n")
    assert available_memory_mib(tmp_path, _meminfo(tmp_path, 4 * 1024 * 1024)) == 4 * 1024


def test_nothing_readable_is_none(tmp_path):
    assert available_memory_mib(tmp_path / "none", tmp_path / "none") is None


def test_this_machine_refuses_a_run_far_beyond_it_in_one_sentence():
    free = available_memory_mib()
    assert free is not None and free > 0  # Linux: /proc/meminfo at least
    require_memory(1)
    with pytest.raises(NotEnoughMemory) as refused:
        require_memory(free * 10, "The Atari notebook at these budgets")
    message = str(refused.value)
    assert message.startswith("The Atari notebook at these budgets needs about ")
    assert "lower the budgets above" in message and "\n" not in message
