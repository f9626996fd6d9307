"""Render the benchmark tables of README.md and the site's pages (docs/) from the benchmarks' JSON.

The docs never carry a measured figure typed by hand: every figure sits in a block between
``<!-- benchmark:NAME -->`` and ``<!-- /benchmark:NAME -->``, written by this script from
``benchmarks/results/harness.json`` (the output of ``python benchmarks/harness.py --json ...``), or for
the compatibility table and the notebooks' memory, from their own JSON files beside it. After a
new measurement:

    python benchmarks/harness.py --json benchmarks/results/harness.json
    python scripts/render_benchmarks.py

``--check`` writes nothing and exits with status 1 when a document differs from what it would write
(the test suite runs it, so docs and JSON cannot drift apart).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from reach import target_reach, transport_reach  # noqa: E402  (the benchmarks' own rule: a target's reach)

RESULTS = ROOT / "benchmarks" / "results" / "harness.json"
#: Written by tests/envs/test_official_envs.py when OPENENV_LAB_COMPATIBILITY_JSON names it.
COMPATIBILITY = ROOT / "benchmarks" / "results" / "compatibility.json"
#: Written by benchmarks/notebook_memory.py --json.
NOTEBOOK_MEMORY = ROOT / "benchmarks" / "results" / "notebook_memory.json"
#: Written by benchmarks/levers.py --json.
LEVERS = ROOT / "benchmarks" / "results" / "levers.json"
#: Written by .ci/run (scripts/ci_phases.py) on a clean clone; ci_phases.py --fast-tier adds the fast tier.
CI = ROOT / "benchmarks" / "results" / "ci.json"
#: Written by benchmarks/libraries.py --json, with the research libraries' venv.
LIBRARIES = ROOT / "benchmarks" / "results" / "libraries.json"
#: Written by benchmarks/isolation.py --json.
ISOLATION = ROOT / "benchmarks" / "results" / "isolation.json"
#: Written by benchmarks/recording.py --json.
RECORDING = ROOT / "benchmarks" / "results" / "recording.json"
#: Blocks read from a JSON file of their own rather than the harness's.
OWN_FILES = {
    "compatibility": COMPATIBILITY,
    "notebook_memory": NOTEBOOK_MEMORY,
    "levers": LEVERS,
    "test_times": CI,
    "libraries": LIBRARIES,
    "isolation": ISOLATION,
    "recording": RECORDING,
}
DOCUMENTS = (
    ROOT / "README.md",
    ROOT / "docs" / "guide" / "notebooks.md",
    ROOT / "docs" / "guide" / "any-server.md",
    ROOT / "docs" / "guide" / "performance.md",
    ROOT / "docs" / "performance.md",
    ROOT / "docs" / "ray.md",
    ROOT / "docs" / "infos.md",
    ROOT / "docs" / "options.md",
    ROOT / "docs" / "recording.md",
)
BLOCK = re.compile(
    r"(<!-- benchmark:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /benchmark:(?P=name) -->)", re.S
)


def _number(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _ratio(a: float | None, b: float | None) -> str:
    if not a or not b:
        return "-"
    return f"{a / b:.2f}x"


#: The reach column's words for each verdict of `reach.reach` (the rule itself lives there, once).
_REACH_COLUMN = {
    "met": "yes: met",
    "reachable": "yes",
    "edge": "at the edge: rounds on both sides",
    "above": "no: above this machine",
}


def _echo_env_reach(t: dict[str, Any]) -> str:
    """Whether the transport target is within reach of any server stepping our `EchoEnvironment`: the raw
    server and client doing that work, against the raw baseline."""
    share = t["raw_echo_env_of_raw"]
    verdict = {
        "met": "and ours meets the target",
        "reachable": "so the target is within reach here",
        "edge": "so the target is at the edge of this machine: the rounds fall on both sides of it",
        "above": "so no implementation stepping that environment reaches the target: "
        "it is above this machine",
    }[transport_reach(t)]
    return (
        f"The raw server and client stepping our `EchoEnvironment` make {share:.2f}x"
        f"{_rounds(t, 'raw_echo_env_of_raw')} the raw baseline's steps, {verdict}."
    )


def _rounds(row: dict[str, Any], share: str, label: str = "rounds ") -> str:
    """A share's lowest and highest round, as " (rounds 0.74-0.94)" (" (0.74-0.94)" in a table, whose
    header says so)."""
    lowest, highest = row[f"{share}_rounds"]
    return f" ({label}{lowest:.2f}-{highest:.2f})"


def _table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table; columns of figures are aligned right."""
    numeric = [all(re.fullmatch(r"[-\d,.x /()]+", row[i]) for row in rows) for i in range(len(header))]
    rule = "|" + "|".join("---:" if i and numeric[i] else "---" for i in range(len(header))) + "|"
    lines = ["| " + " | ".join(header) + " |", rule]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def step_latency(section: dict[str, Any]) -> str:
    rows = [
        [f"`{name}`", _number(row["median_us"]), _number(row["p95_us"]), f"{row['vs_raw']:.2f}x"]
        for name, row in section["step"].items()
    ]
    table = _table(["one chess step through", "median µs", "p95 µs", "vs raw websockets"], rows)
    makes = (
        f'`gym.make("openenv/chess")`: {section["cold_make_s"]:.1f} s cold (the server starts), '
        f"{section['warm_make_median_ms']:.1f} ms warm (median)."
    )
    return f"{table}\n\n{makes}"


def vector_throughput(section: dict[str, Any]) -> str:
    parts = []
    for env, by_size in section["results"].items():
        sizes = list(by_size)
        lone = by_size[sizes[0]]["SyncVectorEnv"]["steps_per_s"] if sizes[0] == "1" else None
        rows = []
        for n, contenders in by_size.items():
            ours = contenders["make_vec (ours)"]

            def rate(name: str, contenders: dict[str, Any] = contenders) -> float | None:
                return contenders.get(name, {}).get("steps_per_s")

            cpu = f"{_number(ours['client_cpu_us_per_step'])} / {_number(ours.get('server_cpu_us_per_step'))}"
            rows.append(
                [
                    n,
                    _number(ours["steps_per_s"]),
                    cpu,
                    _number(rate("make_vec (loop)")),
                    _number(rate("send/recv (ours)")),
                    _number(rate("SyncVectorEnv")),
                    _number(rate("AsyncVectorEnv")),
                    _ratio(ours["steps_per_s"], lone),
                    _ratio(ours["steps_per_s"], rate("AsyncVectorEnv")),
                ]
            )
        header = [
            f"{env}: N",
            "make_vec steps/s",
            "client / server µs per step",
            "on the event loop",
            "send/recv",
            "SyncVectorEnv",
            "AsyncVectorEnv",
            "vs a lone env",
            "vs AsyncVectorEnv",
        ]
        parts.append(_table(header, rows))
    return "\n\n".join(parts)


def env_throughput(section: dict[str, Any]) -> str:
    atari = section["atari_steps_per_s"]
    alone = atari["in-process ALE/Pong-v5"]
    rows = [[name, _number(rate), _ratio(rate, alone)] for name, rate in atari.items()]
    parts = [_table(["Pong, frameskip 4", "steps/s", "vs in-process ALE"], rows)]
    finrl = section["finrl_steps_per_s"]
    cls = finrl["in-process OpenEnv environment class"]
    rows = [[name, _number(rate), _ratio(rate, cls)] for name, rate in finrl.items()]
    parts.append(_table(["FinRL, 5 tickers", "steps/s", "vs the environment class"], rows))
    ceilings = section["ceilings"]
    parts.append(
        "The best a remote env could reach in the same run (its in-process work plus an empty echo round "
        f"trip): Pong {ceilings['atari_vs_in_process']:.2f}x in-process ALE, FinRL "
        f"{ceilings['finrl_vs_environment_class']:.2f}x the environment class."
    )
    return "\n\n".join(parts)


def atari_preprocessing(section: dict[str, Any]) -> str:
    by_size = section["steps_per_s"]
    names = list(next(iter(by_size.values())))
    rows = [[n, *(_number(rates[name]) for name in names)] for n, rates in by_size.items()]
    table = _table(["Pong, preprocessed + 4-stack: N", *names], rows)
    wire = [[name, _number(size)] for name, size in section["bytes_per_step"].items()]
    return f"{table}\n\n{_table(['one Pong step from the server', 'bytes'], wire)}"


def compatibility(section: dict[str, Any]) -> str:
    environments = section["environments"]
    played = {name: row for name, row in environments.items() if row.get("runs_here", True)}
    elsewhere = {name: row for name, row in environments.items() if not row.get("runs_here", True)}
    servers = {name.split(" ")[0] for name in played}  # "openspiel_env (tic_tac_toe)": one environment
    reach = f"**{len(servers)} of {len(servers) + len(elsewhere)} official environments, tested here.**"
    rows = [
        [
            f"`{name}`",
            f"`{row['adapter']}`",
            f"`{row['action']}`",
            f"{row['episodes']} (from {row['episodes_from']})",
            row["check_env"],
            row.get("card", "not run"),
            row["replay"],
            _number(row["steps_per_s"]),
        ]
        for name, row in sorted(played.items())
    ]
    header = [
        "official env",
        "adapter",
        "action space",
        "random-policy episodes",
        "check_env",
        "report card",
        "replay",
        "steps/s",
    ]
    observations = [f"- `{name}`: `{row['observation']}`" for name, row in sorted(played.items())]
    others = _table(
        ["official env", "needs what this machine lacks", "with those means"],
        [[f"`{name}`", row["needs"], row["instead"]] for name, row in sorted(elsewhere.items())],
    )
    return (
        f"{reach}\n\n{_table(header, rows)}\n\nObservation spaces:\n\n"
        + "\n".join(observations)
        + f"\n\nNot played here:\n\n{others}"
    )


def notebook_memory(section: dict[str, Any]) -> str:
    limit = section["binder_mib"]
    rows = []
    for row in section["notebooks"]:
        smoke, own = row["smoke"], row.get("own", {})
        peak = max(smoke["peak_mib"], own.get("peak_mib", 0))
        cut = own.get("cut_cells") or []
        rows.append(
            [
                f"`{row['notebook']}`",
                _number(smoke["peak_mib"]),
                _number(own.get("peak_mib"))
                + (f" (cut after {section['cell_seconds']:.0f} s)" if cut else ""),
                f"{peak / limit:.0%}",
            ]
        )
    header = ["notebook", "smoke mode, MiB", "own budgets, MiB", f"of Binder's {limit:,} MiB"]
    lines = [_table(header, rows)]
    build = section.get("binder_build")
    if build:
        lines.append(
            f"Binder's image build (`binder/requirements.txt`, then `postBuild`, in a fresh venv with this "
            f"machine's pip cache): {build['install_s']:,.0f} s, {build['venv_mib']:,.0f} MiB."
        )
    first = section.get("colab_first_picture")
    if first:
        lines.append(
            "On a venv of Colab's versions (with this machine's pip cache): the chess notebook's install "
            f"cell {first['install_cell_s']:.0f} s; then, from a new process's start, the first observation "
            f'of `gym.make("openenv/chess")` {first["first_observation_s"]:.1f} s (the embedded server '
            f"starts) and the first widget (the viewer of a short game) {first['first_widget_s']:.1f} s."
        )
    return "\n\n".join(lines)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def suite_times(section: dict[str, Any]) -> str:
    """How long the install, the whole suite and the fast tier take (`.ci/run`'s phases on a clean clone)."""
    phases = {phase["name"]: phase["seconds"] for phase in section["phases"]}
    install = phases.get("venv: README's install")
    text = (
        f"A clean clone's whole `.ci/run` took {_minutes(section['whole_run_s'])}: "
        f"{_minutes(section['before_tests_s'])} to install every venv it tests with, side by side (the "
        "README's own install "
        + (f"{_minutes(install)} of it" if install is not None else "among them")
        + ", the Colab tier's notebooks run meanwhile), then "
        f"{_minutes(section['tests_s'])} for the test command above."
    )
    if section.get("cpu_busy") is not None:
        text += (
            f" Its CPUs were {100 * section['cpu_busy']:.0f}% busy over the whole run: the time is CPU work, "
            "which more workers on the same cores do not shorten."
        )
    if section.get("fast_tier_s") is not None:
        text += f" The fast tier took {_minutes(section['fast_tier_s'])}."
    return text


def fleet(section: dict[str, Any]) -> str:
    parts = []
    for env, result in section["results"].items():
        throughput = result["throughput"]
        one = throughput[next(iter(throughput))]["steps_per_s"]
        rows = [
            [n, _number(row["steps_per_s"]), _ratio(row["steps_per_s"], one)] for n, row in throughput.items()
        ]
        starts = ", ".join(
            f"{_where(n)} {value:.1f} s"
            if isinstance(value, (int, float))
            else f"{_where(n)}: {value.split(':')[0]}"
            for n, value in result["start_to_first_step_s"].items()
        )
        table = _table(
            [f"{env}, {section['num_envs']} sub-environments: servers", "steps/s", "vs one server"], rows
        )
        parts.append(f"{table}\n\nFrom nothing to the first step: {starts}.")
    return "\n\n".join(parts)


#: The scaling model's node: cores per machine (a common cloud size), and the targets in steps/s.
NODE_CORES = 16
TARGETS = (10**5, 10**6)


def scaling(section: dict[str, Any]) -> str:
    """The scaling model of docs/ray.md, on paper from measured inputs: the server's and the client's CPU
    per step at the largest vector env measured (``vector_throughput``), Atari's bytes per step
    (``atari_preprocessing``), and how many nodes and how much bandwidth the targets would take."""
    throughput, atari = section["vector_throughput"]["results"], section["atari_preprocessing"]
    atari_bytes = atari["bytes_per_step"].get("preprocessed (84x84, zlib)")
    header = ["family (N)", "server CPU µs/step", "client CPU µs/step", "bytes/step"]
    header += [f"nodes of {NODE_CORES} cores for {t:,} steps/s" for t in TARGETS]
    header += [f"Gbit/s at {t:,} steps/s" for t in TARGETS]
    rows = []
    for family, by_n in throughput.items():
        n = max(by_n, key=int)
        ours = by_n[n].get("make_vec (ours)")
        if ours is None:
            continue
        server, client = ours["server_cpu_us_per_step"], ours["client_cpu_us_per_step"]
        size = atari_bytes if family == "atari" else None
        nodes = [_number((server + client) * 1e-6 * t / NODE_CORES, 1) for t in TARGETS]
        bandwidth = [_number(size * 8 * t / 1e9, 2) if size is not None else "-" for t in TARGETS]
        rows.append([f"{family} ({n})", _number(server), _number(client), _number(size), *nodes, *bandwidth])
    return _table(header, rows)


def ceilings(section: dict[str, Any]) -> str:
    rows = [
        [
            name,
            _number(row["steps_per_s"]),
            _number(row["ceiling_per_s"]),
            f"{row['of_ceiling']:.2f}{_rounds(row, 'of_ceiling', '')}",
            f"{row['target']:.1f}",
            _number(row["raw_per_s"]),
            f"{row['raw_of_ceiling']:.2f}",
            f"{row['vs_raw']:.2f}x",
        ]
        for name, row in section["targets"].items()
    ]
    targets = _table(
        [
            "steps per second",
            "ours",
            "ceiling",
            "of the ceiling (rounds)",
            "target",
            "raw server, same work",
            "raw, of the ceiling",
            "ours vs raw",
        ],
        rows,
    )
    reach_table = _table(
        [
            "what the target asks",
            "raw, of its own ceiling (rounds)",
            "target",
            "reachable here",
            "ours vs raw",
            "= servers, same raw client",
            "x clients, our server",
        ],
        [
            [
                name,
                f"{row['raw_of_raw_ceiling']:.2f}{_rounds(row, 'raw_of_raw_ceiling', '')}",
                f"{row['target']:.1f}",
                _REACH_COLUMN[target_reach(row)],
                f"{row['vs_raw']:.2f}x",
                f"{row['servers_same_client']:.2f}x",
                f"{row['clients_same_server']:.2f}x",
            ]
            for name, row in section["targets"].items()
        ],
    )
    t = section["transport"]
    transport = (
        f"The transport: `openenv/echo` make_vec {section['settings']['n']} "
        f"{_number(t['echo_make_vec_per_s'])} steps/s against a raw `websockets` server and client, "
        f"{_number(t['raw_batched_per_s'])} steps/s: {t['vs_raw']:.2f}x{_rounds(t, 'vs_raw')} (target "
        f"{t['target']}). "
        f"CPU per step: client {t['ours_client_cpu_us']:.0f} µs (raw {t['raw_client_cpu_us']:.0f}), server "
        f"{t['ours_server_cpu_us']:.0f} µs (raw {t['raw_server_cpu_us']:.0f}). Driven by the same raw "
        f"client, our server answers {t['servers_same_client']:.2f}x as many steps as the raw one (and "
        f"{t['servers_same_env']:.2f}x as many as the raw one stepping our `EchoEnvironment`, with its "
        f"pydantic action and observation, where the plain raw one answers from dicts); on our server, our "
        f"vector env makes {t['clients_same_server']:.2f}x as many as the raw client. "
        f"{_echo_env_reach(t)}"
    )
    parts = ("env_us", "serialisation_us", "transport_us", "out_of_process_us", "framework_us")
    split = _table(
        [
            "server CPU per step, one env (µs)",
            "total",
            "environment",
            "serialisation",
            "transport",
            "out of process",
            "framework",
        ],
        [
            [family, _number(row["server_cpu_us"]), *(_number(row[key]) for key in parts)]
            for family, row in section["server_breakdown_us"].items()
        ],
    )
    client = section["client_breakdown_us"]
    names = list(client)
    groups = [
        [group, *(f"{client[name][group]:.1f}" for name in names)] for group in next(iter(client.values()))
    ]
    raw = section["raw_client_on_our_server_cpu_us"]  # the raw client, playing the stages' server
    groups.append(["the raw client on our server, whole", *(f"{raw[name]:.1f}" for name in names)])
    client_table = _table(["client CPU per env step (µs)", *(f"`{name}`" for name in names)], groups)
    return f"{targets}\n\n{reach_table}\n\n{transport}\n\n{split}\n\n{client_table}"


def levers(section: dict[str, Any]) -> str:
    """The client's speed levers (benchmarks/levers.py): parsers, the work beyond the wire beside
    gymnasium's own, batch decoding, N=1 and cold start."""
    parsers = _table(
        [
            "JSON parser, µs per env step (make_vec 16 reply)",
            "pydantic (ours)",
            "orjson",
            "json",
            "scan for 19+ digits",
        ],
        [
            [family, *(f"{row[k]:.2f}" for k in ("pydantic", "orjson", "json", "scan for 19+ digits"))]
            for family, row in section["parsers_us_per_env"].items()
        ],
    )
    parts = ("decode", "batched infos", "observations batched", "ours, together")
    gym_key = "gymnasium SyncVectorEnv, the same transitions"
    beyond = _table(
        ["beyond the wire, µs per env step", *parts, "gymnasium's SyncVectorEnv, same transitions"],
        [
            [family, *(f"{row[k]:.2f}" for k in (*parts, gym_key))]
            for family, row in section["beyond_the_wire_us_per_env"].items()
        ],
    )
    states = section["batch_decoding_us_per_env"]
    n_one = _table(
        ["`openenv/echo`, N=1", "steps/s", "main thread CPU per step (µs)"],
        [
            [name, _number(row["steps_per_s"]), _number(row["main_thread_cpu_us"])]
            for name, row in section["n_one"].items()
        ],
    )
    cold = section["cold_start"]
    return (
        f"{parsers}\n\norjson reads the integer -9223372036854775809 as "
        f"`{section['orjson_on_a_big_integer']}`.\n\n{beyond}\n\nFinRL's sixteen state vectors: "
        f"{states['one np.asarray per env']:.2f} µs per env step one `np.asarray` each, "
        f"{states['one np.array for the batch']:.2f} as one `np.array`.\n\n{n_one}\n\n"
        f"`import openenv_lab` in a new process: {cold['import openenv_lab_s']:.2f} s; an embedded echo "
        f"server's whole start: {cold['embedded echo server start_s']:.2f} s."
    )


def libraries(section: dict[str, Any]) -> str:
    """Steps per second each research library gets over our envs and over ALE's (benchmarks/libraries.py)."""
    ours, ale = "openenv/Breakout-ram-v5", "ALE/Breakout-v5, RAM"
    rows = [
        [
            library,
            _number(row.get(ours)),
            _number(row.get(ale)),
            _ratio(row.get(ours), row.get(ale)),
            _number(row.get("openenv/finrl")),
            _number(row.get("openenv/chess")),
        ]
        for library, row in section["steps_per_s"].items()
    ]
    n = section["n"]
    header = [f"steps/s, {n} envs, random actions", f"`{ours}`", f"`{ale}`", "ours / ALE"]
    return _table([*header, "`openenv/finrl`", "`openenv/chess`"], rows)


def isolation(section: dict[str, Any]) -> str:
    """Steps per second with steps on worker threads and on the event loop (benchmarks/isolation.py)."""
    rows = [
        [
            f"`openenv/{name.split(',')[0]}`," + name.split(",", 1)[1],
            _number(row["threads_steps_per_s"]),
            _number(row["inline_steps_per_s"]),
            f"{row['threads_over_inline']:.2f}x",
            _number(row["no_limit_steps_per_s"]),
            f"{row['threads_over_no_limit']:.2f}x",
        ]
        for name, row in section["rows"].items()
    ]
    header = [
        "random actions",
        "steps/s, worker threads (default)",
        "steps/s, `--inline-steps`",
        "ratio",
        "steps/s, `--step-timeout 0`",
        "ratio",
    ]
    return _table(header, rows)


def recording(section: dict[str, Any]) -> str:
    """Save time per episode and memory, first thousand episodes against last (benchmarks/recording.py)."""
    bucket = f"{section['bucket']:,}"
    rows = [
        [
            name,
            _number(row["episodes"]),
            f"{row['first_save_ms']:.2f}",
            f"{row['last_save_ms']:.2f}",
            f"{row['save_last_over_first']:.2f}x",
            f"{row['median_last_over_first']:.2f}x",
            f"{row['first_rss_mb']:.0f} -> {row['last_rss_mb']:.0f}",
            f"{row['plain_episode_ms']:.2f}",
            f"{row['close_s']:.1f}",
        ]
        for name, row in section["rows"].items()
    ]
    header = [
        "recorded run",
        "episodes",
        f"save ms/episode, first {bucket}",
        f"last {bucket}",
        "last / first",
        "last / first, typical save",
        "RSS MB, first -> last",
        "episode ms, not recorded",
        "close() s",
    ]
    return _table(header, rows)


def _where(servers: str) -> str:
    """A fleet benchmark's row name in words: "1 server", "4 servers", "a Docker container"."""
    if servers == "docker":
        return "a Docker container"
    return f"{servers} server" + ("" if servers == "1" else "s")


RENDERERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "step_latency": step_latency,
    "vector_throughput": vector_throughput,
    "env_throughput": env_throughput,
    "atari_preprocessing": atari_preprocessing,
    "fleet": fleet,
    "compatibility": compatibility,
    "scaling": scaling,
    "ceilings": ceilings,
    "notebook_memory": notebook_memory,
    "levers": levers,
    "test_times": suite_times,
    "libraries": libraries,
    "isolation": isolation,
    "recording": recording,
}


def render_block(name: str, report: dict[str, Any]) -> str:
    if name not in RENDERERS:
        raise KeyError(f"No renderer for benchmark block {name!r}; known: {', '.join(RENDERERS)}")
    if name in OWN_FILES:
        section = json.loads(OWN_FILES[name].read_text())
        source, when, cpus, commit = OWN_FILES[name].name, section["when"], section["cpus"], section["commit"]
    else:
        if name not in report and name != "scaling":
            raise KeyError(f"{RESULTS.name} has no {name!r} section: run benchmarks/harness.py again")
        section, source = (report if name == "scaling" else report[name]), RESULTS.name
        when, cpus, commit = report["when"], report["cpus"], report["commit"]
    caption = (
        f"*Measured {when[:10]} on {cpus} CPUs at commit {commit} "
        f"(`benchmarks/results/{source}`, rendered by `scripts/render_benchmarks.py`).*"
    )
    return f"{caption}\n\n{RENDERERS[name](section)}\n"


def render(text: str, report: dict[str, Any]) -> str:
    return BLOCK.sub(lambda m: m.group(1) + render_block(m.group("name"), report) + m.group(4), text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a document is stale")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    report = json.loads(args.results.read_text())
    stale = []
    for document in DOCUMENTS:
        text = document.read_text()
        rendered = render(text, report)
        if rendered != text:
            stale.append(document.name)
            if not args.check:
                document.write_text(rendered)
    if args.check and stale:
        print(f"Stale benchmark tables in {', '.join(stale)}: run python scripts/render_benchmarks.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
