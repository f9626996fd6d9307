"""Limits of our servers: the largest WebSocket message each family reads, sized to its traffic."""

from __future__ import annotations

import json
import subprocess

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from openenv_lab.client import Session
from openenv_lab.servers import BUNDLED_SERVERS
from tests.helpers import serve_cli


def test_each_family_reads_messages_of_its_size_and_no_larger_than_a_few_mib():
    for spec in BUNDLED_SERVERS.values():
        assert 64 << 10 <= spec.max_message_bytes <= 4 << 20, spec.name  # not the framework's 16 MiB


def _serve(*args: str) -> tuple[subprocess.Popen[str], str]:
    process, banner = serve_cli("chess", *args)
    return process, banner[0].split(" listening on ")[1].split()[0]


@pytest.mark.parametrize("limit", [None, 4096])
def test_a_message_over_the_limit_closes_that_connection_only(limit):
    args = [] if limit is None else ["--max-message-bytes", str(limit)]
    process, url = _serve(*args)
    size = (limit or BUNDLED_SERVERS["chess"].max_message_bytes) + 1
    try:
        ws = url.replace("http://", "ws://") + "/ws"
        with connect(ws, max_size=None, open_timeout=10) as big:
            big.send(json.dumps({"type": "reset", "data": {"fen": "x" * size}}))
            with pytest.raises(ConnectionClosed) as closed:
                big.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009  # message too big
        with connect(ws, open_timeout=10) as fair:  # a message under the limit is read as usual
            fair.send(json.dumps({"type": "reset", "data": {"fen": "x" * (size // 2)}}))
            assert "Invalid FEN" in fair.recv(timeout=10)
        with Session(url) as session:  # and the server serves everyone else
            assert session.reset(seed=0).observation["legal_moves"]
    finally:
        process.terminate()
        process.wait(10)
