"""Embedded servers: started on demand, shared, and never left running."""

from __future__ import annotations

import gc
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import gymnasium as gym
import pytest

import openenv_lab
from openenv_lab.client import CapacityError, Client, LaunchError, Session
from openenv_lab.launch import EmbeddedServer, RemoteServer
from openenv_lab.servers import run_server
from tests.helpers import alive, read_line, wait_for


def test_envs_of_a_process_share_one_embedded_server(chess_url):
    first = gym.make("openenv/chess")
    second = gym.make("openenv/chess")
    assert first.unwrapped.base_url == second.unwrapped.base_url == chess_url
    first.close()
    second.close()
    with Client(chess_url) as client:
        assert client.health()["status"] == "healthy"  # closing envs does not stop the shared server


@pytest.mark.slow
def test_a_stopped_server_is_gone_and_its_port_refuses():
    server = EmbeddedServer("chess", opponent="greedy")
    url = server.start()
    pid = server._process.pid
    assert "greedy" in " ".join(server.command())
    server.stop()
    assert wait_for(lambda: not alive(pid))
    assert not server.running
    with pytest.raises(openenv_lab.ConnectError):
        Session(url)


@pytest.mark.slow
def test_a_dropped_server_stops_when_it_is_collected():
    # A notebook cell run twice rebinds `server = EmbeddedServer(...)`: the first server must not linger.
    server = EmbeddedServer("echo")
    url = server.start()
    pid = server._process.pid
    del server
    gc.collect()
    assert wait_for(lambda: not alive(pid))
    with pytest.raises(openenv_lab.ConnectError):
        Session(url)


SCRIPT = textwrap.dedent(
    """
    import sys, gymnasium as gym, openenv_lab
    env = gym.make("openenv/chess")
    env.reset(seed=0)
    print(env.unwrapped.launcher._process.pid, flush=True)
    if sys.argv[1] == "hang":
        import time; time.sleep(600)
    """
)


@pytest.mark.slow
def test_the_server_stops_when_the_python_process_exits():
    out = subprocess.run([sys.executable, "-c", SCRIPT, "exit"], capture_output=True, text=True, timeout=120)
    pid = int(out.stdout.strip())
    assert wait_for(lambda: not alive(pid), timeout=15)


@pytest.mark.slow
def test_the_server_stops_when_the_python_process_is_killed():
    """No exit handlers run on SIGKILL: the server notices its stdin closing and exits by itself."""
    process = subprocess.Popen([sys.executable, "-c", SCRIPT, "hang"], stdout=subprocess.PIPE, text=True)
    pid = int(read_line(process, timeout=120))
    assert alive(pid)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert wait_for(lambda: not alive(pid), timeout=15)


@pytest.mark.slow
def test_a_server_that_fails_to_start_reports_its_output():
    with pytest.raises(
        LaunchError, match="--opponent-depth: expected a whole number from 1 to 30, got '0'"
    ) as caught:
        EmbeddedServer("chess", opponent_depth=0, startup_timeout=60).start()
    assert "exited with status" in str(caught.value)


@pytest.mark.slow
def test_a_refused_option_is_reported_in_one_line():
    with pytest.raises(
        LaunchError, match=r"It said: .*argument --opponent: invalid choice: 'bogus'"
    ) as caught:
        EmbeddedServer("chess", opponent="bogus", startup_timeout=60).start()
    assert "usage:" not in str(caught.value)  # argparse's error line, not its whole usage text
    with pytest.raises(
        LaunchError, match="--max-steps: expected a whole number from 1 to 1,000,000,000, got '0'"
    ):
        EmbeddedServer("echo", max_steps=0, startup_timeout=60).start()  # at start, not at the first step


def test_unknown_server_and_options_are_value_errors():
    with pytest.raises(ValueError, match="no bundled server called 'go'"):
        EmbeddedServer("go")
    with pytest.raises(ValueError, match="no option"):
        EmbeddedServer("chess", colour="white")


@pytest.mark.parametrize(("name", "module"), [("atari", "ale_py"), ("finrl", "stockstats")])
def test_a_server_whose_extra_is_not_installed_says_what_to_install(monkeypatch, name, module):
    """The README's first install has neither ale-py nor stockstats: one sentence, and no process started."""
    monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    install = re.escape(f"pip install 'openenv-lab[{name}]'")
    server = EmbeddedServer(name)
    with pytest.raises(
        LaunchError,
        match=rf"^The {name} server needs .*{install} to run it here, or reach one running "
        r"elsewhere \(base_url=.* in Python; --base-url on the command line\)\.$",
    ):
        server.start()
    assert server._process is None
    with pytest.raises(ImportError, match=install):
        run_server(name)  # what `openenv-lab serve` runs, and Python code may too
    hidden = f"import runpy, sys; sys.modules[{module!r}] = None; "
    hidden += "runpy.run_module('openenv_lab', run_name='__main__')"
    out = subprocess.run(
        [sys.executable, "-c", hidden, "serve", name], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert (
        f"openenv-lab serve: The {name} server needs" in out.stderr and f"openenv-lab[{name}]" in out.stderr
    )
    out = subprocess.run(  # a command that starts the embedded server names the CLI's option
        [sys.executable, "-c", hidden, "bench", f"openenv/{name}", "--steps", "5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert f"openenv-lab bench: The {name} server needs" in out.stderr and "--base-url" in out.stderr


@pytest.mark.slow
def test_capacity_of_an_embedded_server():
    with EmbeddedServer("chess", max_sessions=1) as server:
        capacity = Client(server.base_url).capacity()
        assert capacity == {
            "active_sessions": 0,
            "max_sessions": 1,
            "batch_route": "/ws/batch",
            "max_batch": 1,
        }
        with Session(server.base_url), pytest.raises(CapacityError, match="1/1"):
            Session(server.base_url)


def test_remote_server_is_only_a_url():
    remote = RemoteServer("127.0.0.1:9/")
    assert remote.start() == "http://127.0.0.1:9"
    remote.stop()


@pytest.mark.slow
def test_an_interrupted_start_leaves_nothing_running(monkeypatch):
    """Ctrl+C while the server starts (a real SIGINT in the main thread) must stop the child."""
    server = EmbeddedServer("chess")
    children: list[int] = []

    def interrupted(self, timeout=30.0, **kwargs):
        # The child is running and announced its port; now the user presses Ctrl+C.
        children.append(server._process.pid)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)  # the KeyboardInterrupt arrives during this sleep

    monkeypatch.setattr(Client, "wait_until_healthy", interrupted)
    # What an interactive Python does on Ctrl+C, whatever handler this test process has been given.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            server.start()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert children and wait_for(lambda: not alive(children[0]))
    assert not server.running


RESTART_SCRIPT = textwrap.dedent(
    """
    import os, signal, gymnasium as gym, openenv_lab
    env = gym.make("openenv/chess")
    env.reset(seed=0)
    os.kill(env.unwrapped.launcher._process.pid, signal.SIGKILL)
    try:
        env.step(env.unwrapped.adapter.move_to_action(env.unwrapped.adapter._legal_list[0]))
    except openenv_lab.SessionClosed:
        print("lost")
    obs, info = env.reset(seed=1)  # restarts the embedded server
    print(int(obs["action_mask"].sum()))
    """
)


@pytest.mark.slow
def test_reset_after_the_embedded_server_died_starts_a_new_one():
    out = subprocess.run([sys.executable, "-c", RESTART_SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["lost", "20"]


@pytest.mark.slow
def test_a_server_process_skips_jsonschemas_slow_optional_import():
    # rfc3987_syntax compiles lark grammars at import (seconds); a server builds its app without it, and
    # the module stays importable afterwards.
    script = textwrap.dedent(
        """
        import sys
        from openenv_lab.servers import _run, get_bundled_server
        _run._import_jsonschema_without_iri_format()
        get_bundled_server("echo").make_app(max_sessions=1)
        print("rfc3987_syntax" in sys.modules, "jsonschema" in sys.modules)
        import rfc3987_syntax
        print(rfc3987_syntax.__name__)
        """
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert completed.stdout.split() == ["False", "True", "rfc3987_syntax"]
