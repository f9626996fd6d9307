"""The fuzz of the test suite at full size, both directions, with counts of what happened.

Server side: for each family (chess, echo, FinRL, Atari, echo with MCP tools), ``--examples`` fuzzed
HTTP bodies for ``POST /reset`` and ``POST /step`` and ``--examples`` fuzzed WebSocket sequences for
``/ws`` and for ``/ws/batch``, from the strategies of ``tests/fuzzing.py``. It counts the answers (HTTP
statuses; WebSocket reply types, error codes and closes) and checks the properties of the tests: never a
5xx, never a traceback, strict JSON, clean closes only, no session left behind, a fresh client served.

Client side: ``--examples`` hostile plans for each way of driving our client (single env, vector env on
``/ws/batch``, vector env on ``/ws``) through `tests.fuzzing.HostileServer`, counting the documented
errors raised, and the slowest call beside the longest it may take.

    python benchmarks/fuzz.py                     # 1,000 examples per route: 20,000 server-side, 3,000
                                                  # client-side (~40 minutes here)
    python benchmarks/fuzz.py --examples 50       # a few minutes
    python benchmarks/fuzz.py --json results/fuzz.json

Any property that fails stops the run with hypothesis's smallest failing example.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from openenv_lab.client import Client, Session  # noqa: E402
from openenv_lab.launch import EmbeddedServer  # noqa: E402
from tests.fuzzing import (  # noqa: E402  # the tests' own strategies, from the checkout
    SCENARIOS,
    TRACEBACK,
    WS_VALID,
    HostileServer,
    batch_messages,
    bodies,
    exchange,
    plans,
    run_scenario,
    ws_messages,
)

HTTP_VALID = {
    "chess": {"/reset": {"seed": 1}, "/step": {"action": {"move": "e2e4"}}},
    "echo": {"/reset": {"seed": 1}, "/step": {"action": {"message": "hi"}}},
    "finrl": {"/reset": {"seed": 1}, "/step": {"action": {"actions": [0.1, 0, 0, 0, 0]}}},
    "atari": {"/reset": {"seed": 1}, "/step": {"action": {"action_id": 0}}},
    "echo_mcp": {"/reset": {}, "/step": {"action": WS_VALID["echo_mcp"]["step"]}},
}


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )


def _http_property(url: str, path: str, valid: Any, examples: int, counts: collections.Counter[str]) -> Any:
    @_settings(examples)
    @given(body=bodies(valid))
    def post(body: bytes) -> None:
        response = httpx.post(
            url + path, content=body, headers={"content-type": "application/json"}, timeout=30
        )
        assert response.status_code < 500, (response.status_code, response.text[:300])
        assert TRACEBACK not in response.text
        counts[f"HTTP {response.status_code}"] += 1

    return post


def _ws_property(url: str, route: str, valid: Any, examples: int, counts: collections.Counter[str]) -> Any:
    messages = ws_messages(valid) if route == "/ws" else batch_messages(valid, 2)

    @_settings(examples)
    @given(sequence=st.lists(messages, min_size=1, max_size=6))
    def talk(sequence: list[Any]) -> None:
        counts.update(exchange(url, route, sequence))
        counts["connections"] += 1

    return talk


def _client_property(hostile: HostileServer, scenario: str, examples: int, row: dict[str, Any]) -> Any:
    counts: collections.Counter[str] = row["counts"]

    @_settings(examples)
    @given(replies=plans, http=plans)
    def drive(replies: list[Any], http: list[Any]) -> None:
        outcome = run_scenario(hostile, scenario, replies, http[:2] if len(http) > 6 else [])
        assert outcome.slowest <= outcome.bound, outcome
        counts[outcome.error or "worked"] += 1
        row["slowest_call_s"] = round(max(row["slowest_call_s"], outcome.slowest), 3)
        row["longest_allowed_s"] = outcome.bound

    return drive


def server_side(examples: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for family in WS_VALID:
        options = {"mcp": True} if family == "echo_mcp" else {}
        with EmbeddedServer(family.removesuffix("_mcp"), **options) as server:
            url = server.base_url
            assert url is not None
            for path, valid in HTTP_VALID[family].items():
                counts: collections.Counter[str] = collections.Counter()
                started = time.monotonic()
                _http_property(url, path, valid, examples, counts)()
                results[f"{family} POST {path}"] = _row(counts, started)
                print(f"  {family} POST {path}: {dict(counts)}", flush=True)
            for route in ("/ws", "/ws/batch?sessions=2"):
                counts = collections.Counter()
                started = time.monotonic()
                _ws_property(url, route, WS_VALID[family], examples, counts)()
                results[f"{family} {route.split('?')[0]}"] = _row(counts, started)
                print(f"  {family} {route}: {dict(counts)}", flush=True)
            deadline = time.monotonic() + 15
            while Client(url).capacity()["active_sessions"] and time.monotonic() < deadline:
                time.sleep(0.1)
            left = Client(url).capacity()["active_sessions"]
            assert left == 0, f"{family}: {left} sessions left behind"
            with Session(url) as session:
                session.reset(seed=0)
        print(f"  {family}: done", flush=True)
    return results


def client_side(examples: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with EmbeddedServer("echo") as upstream:
        assert upstream.base_url is not None
        with HostileServer(upstream.base_url) as hostile:
            for scenario in SCENARIOS:
                row: dict[str, Any] = {"counts": collections.Counter(), "slowest_call_s": 0.0}
                started = time.monotonic()
                _client_property(hostile, scenario, examples, row)()
                results[scenario] = {**_row(row["counts"], started), **row, "counts": dict(row["counts"])}
                print(f"  {scenario}: done", flush=True)
    return results


def _row(counts: collections.Counter[str], started: float) -> dict[str, Any]:
    return {"counts": dict(counts.most_common()), "seconds": round(time.monotonic() - started, 1)}


def _print(title: str, results: dict[str, Any]) -> None:
    print(f"\n{title}")
    for name, row in results.items():
        counts = ", ".join(f"{label}: {n:,}" for label, n in row["counts"].items())
        extra = (
            f"; slowest call {row['slowest_call_s']} s of {row['longest_allowed_s']} s"
            if "slowest_call_s" in row
            else ""
        )
        print(f"  {name:<32} {counts}{extra} ({row['seconds']} s)")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=1000, help="per route and per client scenario")
    parser.add_argument("--sides", default="server,client", help="which to run (default: %(default)s)")
    parser.add_argument("--json", default=None, help="write the counts to this JSON file")
    args = parser.parse_args(argv)
    print(f"Fuzz: {args.examples:,} examples per route (server side) and per scenario (client side)")
    report: dict[str, Any] = {"examples_per_route": args.examples}
    sides = args.sides.split(",")
    report["server"] = server_side(args.examples) if "server" in sides else {}
    _print("Server side: answers to fuzzed requests (every property held)", report["server"])
    report["client"] = client_side(args.examples) if "client" in sides else {}
    _print("Client side: outcomes against a hostile server (every property held)", report["client"])
    server_total = sum(
        sum(v for k, v in r["counts"].items() if k.startswith("HTTP") or k == "connections")
        for r in report["server"].values()
    )
    client_total = sum(sum(r["counts"].values()) for r in report["client"].values())
    report["server_examples"], report["client_examples"] = server_total, client_total
    print(f"\n{server_total:,} server-side and {client_total:,} client-side examples, no property failed")
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2))
        print(f"Results written to {path}")
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
