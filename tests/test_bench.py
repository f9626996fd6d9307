"""openenv_lab.bench and ``openenv-lab bench``: what it reports about our servers and official ones."""

from __future__ import annotations

import json

import openenv_lab
from openenv_lab.cli import main


def test_bench_on_our_chess_server(chess_url):
    report = openenv_lab.bench("chess", base_url=chess_url, steps=30)
    assert report.env_id == "openenv/chess" and report.steps == 30
    assert 0 < report.p50_ms <= report.p95_ms
    assert 100 < report.bytes_per_step < 5_000  # a UCI move out, a FEN and the legal moves back
    assert report.max_sessions == 64 and "GET /capacity" in report.max_sessions_note
    assert report.seeds_honoured and "confirms" in report.seed_note
    assert "p50" in str(report)


def test_bench_finds_what_an_official_server_does_not_say(official_grid_world):
    """The official grid_world_env reports no capacity (found by opening sessions: one) and does not confirm
    seeds (its episodes are all the same one, so a seed replays it)."""
    report = openenv_lab.bench("openenv/remote", base_url=official_grid_world, steps=10)
    assert report.max_sessions == 1 and "opening sessions" in report.max_sessions_note
    assert report.seeds_honoured is True and "does not confirm seeds" in report.seed_note


def test_bench_cli_prints_json(chess_url, capsys):
    assert main(["bench", "chess", "--base-url", chess_url, "--steps", "10", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["steps"] == 10 and report["seeds_honoured"] is True


def test_bench_cli_on_no_server_is_one_line(capsys):
    assert main(["bench", "chess", "--base-url", "http://127.0.0.1:9", "--steps", "5"]) == 1
    assert capsys.readouterr().err.startswith("openenv-lab bench: ")
