"""No session can stall the others: a step that is slow for a reason nobody predicted runs on a worker thread
of its session (``/ws``) or connection (``/ws/batch``), so the server's event loop keeps answering
``/health``, the other sessions and the WebSocket pings meanwhile (`openenv_lab.servers._base`). With
``--inline-steps`` the same step stalls everyone: the test sees the difference, so it can fail."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from openenv_lab.client import Client, Keepalive, Session
from tests.helpers import read_line, wait_for

ROOT = Path(__file__).resolve().parents[2]
#: How long the deliberately slow step keeps the CPU busy.
LONG_STEP = 8.0


@contextmanager
def slow_server(*args: str) -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.servers.slow_server", "--ping-interval", "1", *args],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        url = read_line(process, timeout=120).strip()
        assert url.startswith("http://"), url or "the slow server printed nothing"
        with Client(url) as client:
            client.wait_until_healthy(60)
        yield url
    finally:
        process.terminate()
        process.wait(10)


def served_meanwhile(url: str, long_step: Callable[[], object]) -> tuple[list[float], list[float]]:
    """Run ``long_step`` in a thread; meanwhile time another session's round trips and ``/health``."""
    keepalive = Keepalive(interval=1.0, timeout=1.0)  # a stalled loop would drop it within seconds
    with Session(url, keepalive=keepalive) as other:
        other.reset()
        for _ in range(20):
            other.step({"seconds": 0})
        worker = threading.Thread(target=long_step)
        worker.start()
        time.sleep(0.5)
        round_trips, health_checks = [], []
        while worker.is_alive():
            started = time.perf_counter()
            other.step({"seconds": 0})
            round_trips.append(time.perf_counter() - started)
            started = time.perf_counter()
            assert httpx.get(url + "/health", timeout=2 * LONG_STEP).json()["status"] == "healthy"
            health_checks.append(time.perf_counter() - started)
            time.sleep(0.1)
        worker.join()
        assert other.step({"seconds": 0}).observation["took"] < 1  # its keepalive did not time out
    return round_trips, health_checks


@pytest.mark.slow
def test_a_long_step_stalls_no_other_session_nor_health_nor_pings():
    with slow_server() as url:
        with Session(url, keepalive=Keepalive(interval=1.0, timeout=1.0)) as long:
            long.reset()
            for _ in range(50):  # cheap steps first: however cheap they were, the long one stalls no one
                long.step({"seconds": 0})
            took = []
            round_trips, health_checks = served_meanwhile(
                url, lambda: took.append(long.step({"seconds": LONG_STEP}).observation["took"])
            )
            assert took[0] >= LONG_STEP
            assert long.step({"seconds": 0}).observation["took"] < 1  # its own keepalive held too
        assert len(round_trips) >= 10, "the other session was served only a few times during the long step"
        # Unstalled, a round trip is milliseconds; stalled, it would wait out the long step.
        assert max(round_trips) < LONG_STEP / 10, sorted(round_trips)[-5:]
        assert max(health_checks) < LONG_STEP / 10, sorted(health_checks)[-5:]


@pytest.mark.slow
def test_a_long_step_in_a_batch_stalls_no_other_connection():
    with slow_server() as url, connect(url.replace("http://", "ws://") + "/ws/batch?sessions=2") as batch:
        batch.send(json.dumps({"type": "batch", "data": [{"session": i, "type": "reset"} for i in (0, 1)]}))
        assert [r["type"] for r in json.loads(batch.recv(timeout=30))["data"]] == ["observation"] * 2
        replies = []

        def long_step() -> None:
            entries = [{"session": 0, "type": "step", "data": {"seconds": LONG_STEP / 2}}]
            entries.append({"session": 1, "type": "step", "data": {"seconds": 0}})
            batch.send(json.dumps({"type": "batch", "data": entries}))
            replies.extend(json.loads(batch.recv(timeout=4 * LONG_STEP))["data"])

        round_trips, _ = served_meanwhile(url, long_step)
        assert [r["type"] for r in replies] == ["observation"] * 2
        assert replies[0]["data"]["observation"]["took"] >= LONG_STEP / 2
        assert len(round_trips) >= 5 and max(round_trips) < LONG_STEP / 10, sorted(round_trips)[-5:]


@pytest.mark.slow
def test_with_inline_steps_the_same_step_stalls_everyone():
    """The trade-off ``serve --inline-steps`` documents, and the proof that the tests above can fail."""
    with slow_server("--inline-steps") as url, Session(url) as long:
        long.reset()
        worker = threading.Thread(target=lambda: long.step({"seconds": 2.0}))
        worker.start()
        time.sleep(0.5)
        started = time.perf_counter()
        httpx.get(url + "/health", timeout=30)
        waited = time.perf_counter() - started
        worker.join()
        assert waited > 0.5, "with steps on the event loop, /health waits for the step"


def test_a_servers_steps_run_on_a_worker_thread_unless_inline():
    import asyncio

    from openenv_lab.servers.echo import EchoAction, EchoEnvironment

    env = EchoEnvironment(max_steps=10)
    env.reset()
    where = []
    step = env.step
    env.step = lambda action: where.append(threading.current_thread().name) or step(action)
    asyncio.run(env.step_async(EchoAction(message="hi")))
    assert where[-1].startswith("echo-steps"), where
    env.inline_steps = True  # as `serve --inline-steps` sets it for the whole process
    asyncio.run(env.step_async(EchoAction(message="hi")))
    assert where[-1] == threading.current_thread().name


@pytest.mark.slow
def test_a_step_past_the_step_timeout_ends_its_session_and_no_other(tmp_path):
    """``--step-timeout``: the client gets a STEP_TIMEOUT error and a close at the limit, not when the step
    returns; the other sessions go on; the environment is closed only once its step has returned."""
    closed_log = tmp_path / "closed.log"
    with slow_server("--step-timeout", "1.5", "--closed-log", str(closed_log)) as url:
        with Session(url) as other:
            other.reset()
            with connect(url.replace("http://", "ws://") + "/ws", open_timeout=10) as long:
                long.send(json.dumps({"type": "reset", "data": {}}))
                assert json.loads(long.recv(timeout=10))["type"] == "observation"
                started = time.perf_counter()
                long.send(json.dumps({"type": "step", "data": {"seconds": 5}}))
                error = json.loads(long.recv(timeout=30))
                waited = time.perf_counter() - started
                with pytest.raises(ConnectionClosed) as ended:
                    long.recv(timeout=10)
            assert error["type"] == "error" and error["data"]["code"] == "STEP_TIMEOUT", error
            assert "--step-timeout" in error["data"]["message"] and error["data"]["seconds"] == 1.5
            assert 1.5 <= waited < 4, waited  # at the limit, not when the 5 s step returns
            assert ended.value.rcvd is not None and ended.value.rcvd.code == 1008
            assert other.step({"seconds": 0}).observation["took"] < 1  # the other session goes on
            assert wait_for(
                lambda: closed_log.exists() and "closed after 1 steps" in closed_log.read_text(), 30
            )
        assert "MID-STEP" not in closed_log.read_text()


@pytest.mark.slow
def test_a_batch_past_the_step_timeout_ends_its_connection_and_over_http_it_is_a_504():
    with slow_server("--step-timeout", "1") as url:
        with connect(url.replace("http://", "ws://") + "/ws/batch?sessions=2", open_timeout=10) as batch:
            resets = [{"session": i, "type": "reset"} for i in (0, 1)]
            batch.send(json.dumps({"type": "batch", "data": resets}))
            json.loads(batch.recv(timeout=30))
            entries = [{"session": 0, "type": "step", "data": {"seconds": 4}}]
            batch.send(json.dumps({"type": "batch", "data": entries}))
            error = json.loads(batch.recv(timeout=30))
            assert error["type"] == "error" and error["data"]["code"] == "STEP_TIMEOUT", error
            with pytest.raises(ConnectionClosed):
                batch.recv(timeout=10)
        reply = httpx.post(url + "/step", json={"action": {"seconds": 3, "burn": False}}, timeout=30)
        assert reply.status_code == 504 and "--step-timeout" in reply.json()["detail"], reply.text
        with Session(url) as fresh:  # the server serves everyone afterwards
            fresh.reset()
            assert fresh.step({"seconds": 0}).observation["took"] < 1
