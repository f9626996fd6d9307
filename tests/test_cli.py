"""The openenv-lab command: serve and play, including their failures."""

from __future__ import annotations

import io
import os
import re
import signal
import socket
import stat
import subprocess
import sys

import chess.pgn
import pytest

from openenv_lab.cli import main
from openenv_lab.client import Client, Session
from tests.helpers import read_line


def test_play_prints_results_and_writes_a_pgn(tmp_path, chess_url, capsys):
    pgn = tmp_path / "new" / "games.pgn"  # missing directories are made
    umask = os.umask(0o022)
    os.umask(umask)
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
    assert os.listdir(pgn.parent) == ["games.pgn"]  # no temporary file left behind
    if os.name != "nt":
        assert stat.S_IMODE(pgn.stat().st_mode) == 0o666 & ~umask  # as any new file, not mkstemp's 0o600


def test_play_refuses_a_pgn_path_it_cannot_write_before_playing(tmp_path, chess_url, capsys):
    (tmp_path / "file").write_text("x")
    for pgn, problem in ((tmp_path, "it is a directory"), (tmp_path / "file" / "g.pgn", "is a file")):
        assert main(["play", "chess", "--base-url", chess_url, "--pgn", str(pgn)]) == 2
        out, err = capsys.readouterr()
        assert err.startswith(f"openenv-lab play: Cannot save the games to {pgn}: ") and problem in err
        assert "game 1" not in out and len(err.splitlines()) == 1


def test_bad_seed_and_unknown_environment_are_one_clear_line(capsys):
    assert main(["play", "chess", "--seed", "-1"]) == 2
    assert main(["bench", "nope"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "openenv-lab play: --seed must be 0 or more, got -1"
    assert lines[1].startswith("openenv-lab bench: Environment `nope` doesn't exist") and "chess" in lines[1]
    assert len(lines) == 2


def test_play_against_no_server_is_one_clear_line(capsys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert main(["play", "chess", "--base-url", f"http://127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("openenv-lab play: Could not connect to")
    assert "Traceback" not in err


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT")
def test_ctrl_c_stops_serve_quietly():
    process = subprocess.Popen(
        [sys.executable, "-m", "openenv_lab", "serve", "chess", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert "(Ctrl+C to stop)" in read_line(process, timeout=60)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0 and "Traceback" not in err and "Warning" not in err


def test_serve_refuses_max_sessions_below_one(capsys):
    # --port 70000 is refused too, after it: without the check on --max-sessions, that is the error seen
    with pytest.raises(SystemExit) as exit:
        main(["serve", "chess", "--max-sessions", "0", "--port", "70000"])
    assert exit.value.code == 2
    assert (
        "argument --max-sessions: expected a whole number from 1 to 10,000, got '0'"
        in capsys.readouterr().err
    )


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


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{is_slippery: false}", "expected a JSON object, got"),
        ("[1, 2]", r"expected a JSON object \(\{\.\.\.\}\)"),
    ],
)
def test_serve_refuses_env_kwargs_that_are_not_a_json_object(capsys, text, said):
    with pytest.raises(SystemExit) as stopped:
        main(["serve", "gymnasium", "--env-id", "FrozenLake-v1", "--env-kwargs", text, "--port", "0"])
    assert stopped.value.code == 2
    assert re.search(said, capsys.readouterr().err)
