"""The openenv-lab command: serve and play, including their failures."""

from __future__ import annotations

import io
import re
import socket
import subprocess
import sys

import chess.pgn

from openenv_lab.cli import main
from openenv_lab.client import Client, Session
from tests.helpers import read_line


def test_play_prints_results_and_writes_a_pgn(tmp_path, chess_url, capsys):
    pgn = tmp_path / "games.pgn"
    assert (
        main(
            [
                "play",
                "chess",
                "--games",
                "2",
                "--base-url",
                chess_url,
                "--pgn",
                str(pgn),
                "--opponent",
                "greedy",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "game 1:" in out and "game 2:" in out
    assert re.search(r"Agent: (\d) won, (\d) drawn, (\d) lost", out)
    wins, draws, losses = map(int, re.search(r"Agent: (\d) won, (\d) drawn, (\d) lost", out).groups())
    assert wins + draws + losses == 2
    text = pgn.read_text()
    games = []
    handle = io.StringIO(text)
    while (game := chess.pgn.read_game(handle)) is not None:
        games.append(game)
    assert len(games) == 2
    for game in games:
        board = game.end().board()
        assert (
            game.headers["Result"] == board.result(claim_draw=True)
            or game.headers["Termination"] == "move_limit"
        )
        assert game.headers["Termination"]
    assert not list(tmp_path.glob(".openenv-lab-*"))  # no temporary file left behind


def test_play_against_no_server_is_one_clear_line(capsys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert main(["play", "chess", "--base-url", f"http://127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("openenv-lab play: Could not connect to")
    assert "Traceback" not in err


def test_serve_runs_an_openenv_server_until_stopped():
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "openenv_lab",
            "serve",
            "chess",
            "--port",
            "0",
            "--opponent",
            "greedy",
            "--max-sessions",
            "3",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = read_line(process, timeout=60)
        assert "listening on http://127.0.0.1:" in line
        url = line.split("listening on ")[1].split()[0]
        with Client(url) as client:
            client.wait_until_healthy(30)
            assert client.capacity()["max_sessions"] == 3
        with Session(url) as session:
            assert session.reset(seed=0).metadata["opponent"] == "greedy"
    finally:
        process.terminate()
        process.wait(10)


def test_serve_on_a_busy_port_says_so(capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        assert main(["serve", "chess", "--port", str(port)]) == 1
    assert "Choose another --port" in capsys.readouterr().err


def test_serve_help_lists_the_servers_options(capsys):
    try:
        main(["serve", "chess", "--help"])
    except SystemExit as exit:
        assert exit.code == 0
    out = capsys.readouterr().out
    for flag in ("--opponent", "--agent-color", "--opponent-depth", "--max-moves", "--max-sessions"):
        assert flag in out
    assert "--announce" not in out


def test_serve_refuses_a_port_out_of_range(capsys):
    try:
        main(["serve", "chess", "--port", "70000"])
    except SystemExit as exit:
        assert exit.code == 2
    assert "a port is a number from 0 to 65535" in capsys.readouterr().err
