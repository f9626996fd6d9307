"""openenv_lab.check and ``openenv-lab check``: the report card passes what is right and fails what is not,
on our servers, on official ones, on a server that cannot replay a seed, and on one built to break the
other checks.

Each failing branch is seen failing (mutations these tests guard: the observation schema check always
passing, missing rewards (null or NaN on the wire) not counted, episodes both terminated and truncated
not failed, a step after the end accepted not warned about, a failed ``check_env`` reported as a pass,
the command line exiting 0 on a failed card)."""

from __future__ import annotations

import json
import math
import re
import warnings

import gymnasium as gym
import numpy as np
import pytest

import openenv_lab
from openenv_lab.cli import main
from openenv_lab.report_card import ReportCard

QUICK = {"episodes": 3, "steps": 10}


def statuses(card: ReportCard) -> dict[str, str]:
    return {check.name: check.status for check in card.checks}


@pytest.mark.slow
def test_our_echo_server_passes_every_check():
    card = openenv_lab.check("echo", max_steps=4, **QUICK)
    assert card.passed, str(card)
    assert statuses(card) == {
        "openenv validate": "pass",
        "gymnasium check_env": "pass",
        "determinism": "pass",
        "state contract": "pass",
        "observation schema": "pass",
        "rewards sent": "pass",
        "reward range": "pass",
        "episode endings": "pass",
        "capacity": "info",
        "latency": "info",
        "random baseline": "info",
    }
    assert card["openenv validate"].values["criteria"]["health_endpoint"] is True
    assert card["episode endings"].values == {
        "terminated": 0,
        "truncated": 3,
        "still running": 0,
        "after_end": "refused (EXECUTION_ERROR)",
    }
    assert card["capacity"].values["max_sessions"] == 256
    assert card["observation schema"].values["observations"] == 3 * 5  # resets and 4 steps, 3 episodes
    baseline = card["random baseline"].values
    assert baseline["episodes"] == 3 and baseline["ci_low"] <= baseline["mean"] <= baseline["ci_high"]
    assert "all checks passed" in str(card) and "✓ determinism" in str(card)


def test_rewards_outside_the_declared_range_fail():
    card = openenv_lab.check("echo", validate=False, reward_range=(0.0, 1.0), max_steps=3, **QUICK)
    assert not card.passed and card["reward range"].status == "fail"
    assert "outside the declared +0 to +1" in card["reward range"].detail
    assert "FAILED: reward range" in str(card)


def test_chess_counts_both_sides_moves_in_its_state_which_is_a_warning(chess_url):
    card = openenv_lab.check("chess", base_url=chess_url, validate=False, agent_color="white", **QUICK)
    assert (card.env_id, card.base_url) == ("openenv/chess", chess_url)  # that server, not an embedded one
    state = card["state contract"]
    assert state.status == "warn" and state.values["step_counts"][:2] == [0, 2]
    assert card["reward range"].values["declared"] == [-1.0, 1.0]
    assert card.passed


def test_a_server_whose_episodes_never_replay_fails_determinism(framework_dice):
    card = openenv_lab.check(framework_dice, validate=False, **QUICK)
    assert card.env_id == "openenv/remote" and card.base_url == framework_dice
    assert card["determinism"].status == "fail"
    assert "different episodes" in card["determinism"].detail
    assert card["gymnasium check_env"].status == "fail"  # its reset(seed=) does not replay either
    # gymnasium's checker catches it at the reset or at the first step, as the dice fall.
    detail = card["gymnasium check_env"].detail
    assert "non-deterministic" in detail or "not equivalent for the same seed" in detail, detail
    assert not card.passed


def test_a_server_that_breaks_its_schema_skips_rewards_and_plays_on_after_the_end_fails_and_exits_one(
    framework_liar, capsys
):
    code = main(["check", framework_liar, "--json", "--episodes", "2", "--steps", "5", "--no-validate"])
    said = capsys.readouterr()
    assert said.out.strip(), said.err[-2000:]
    card = json.loads(said.out)
    checks = {c["name"]: c for c in card["checks"]}
    assert checks["observation schema"]["status"] == "fail"
    assert (
        "count" in checks["observation schema"]["detail"] and "-1" in checks["observation schema"]["detail"]
    )
    # Its second step of each episode sends NaN, null on the wire: 2 of 6 steps without a reward.
    assert checks["rewards sent"]["status"] == "fail", checks["rewards sent"]
    assert checks["rewards sent"]["values"] == {"missing": 2, "steps": 6, "share": pytest.approx(1 / 3)}
    detail = checks["rewards sent"]["detail"]
    assert "no reward (null, or not a finite number) on 2 of 6 steps (33%)" in detail
    assert checks["reward range"]["values"]["observed"] == [0.0, 0.0]  # the missing ones left out
    assert checks["episode endings"]["status"] == "warn"
    assert "a step after the end was accepted as if the game went on" in checks["episode endings"]["detail"]
    assert card["passed"] is False and code == 1


def test_episodes_both_terminated_and_truncated_fail_the_endings_check():
    from openenv_lab.report_card import _endings

    # No adapter of ours ends an episode both ways (GenericAdapter reads truncation from the metadata), so
    # the rule itself is checked on the endings a third-party adapter could report.
    check = _endings([(True, True), (True, False)], "refused (EXECUTION_ERROR)", max_steps=10)
    assert check.status == "fail" and check.detail.startswith("1 episodes were terminated and truncated")
    fine = _endings([(True, False), (False, True)], "refused (EXECUTION_ERROR)", max_steps=10)
    assert fine.status == "pass"


# Every branch of the two rules, exactly: the mutation pass left 36 mutants of the reward-range rule and 25 of
# the endings rule alive (a skipped or info verdict turned into another, a bound compared with < for <=, a
# count off by one or dropped from the values, the "still running" clause lost).
REWARD_RANGES = [
    ([], (0.0, 1.0), "skip", "no step was played", None),
    (
        [0.0, float("nan")],
        (0.0, 1.0),
        "fail",
        "a reward was not a finite number",
        {"observed": [0.0, 0.0], "declared": [0.0, 1.0]},
    ),
    (
        [0.0, float("inf")],
        None,
        "fail",
        "a reward was not a finite number",
        {"observed": [0.0, float("inf")], "declared": None},
    ),
    (
        [-1.0, 0.5],
        None,
        "info",
        "observed -1 to +0.5; no range declared",
        {"observed": [-1.0, 0.5], "declared": None},
    ),
    (
        [0.0, 1.0],
        (0.0, 1.0),
        "pass",
        "observed +0 to +1, within +0 to +1",
        {"observed": [0.0, 1.0], "declared": [0.0, 1.0]},
    ),
    (
        [-0.5, 1.0],
        (0.0, 1.0),
        "fail",
        "observed -0.5 to +1, outside the declared +0 to +1",
        {"observed": [-0.5, 1.0], "declared": [0.0, 1.0]},
    ),
    (
        [0.0, 1.5],
        (0.0, 1.0),
        "fail",
        "observed +0 to +1.5, outside the declared +0 to +1",
        {"observed": [0.0, 1.5], "declared": [0.0, 1.0]},
    ),
]


@pytest.mark.parametrize(("rewards", "declared", "status", "detail", "values"), REWARD_RANGES)
def test_the_reward_range_rule_on_each_branch(rewards, declared, status, detail, values):
    from openenv_lab.report_card import _reward_range

    check = _reward_range(rewards, declared)
    assert (check.name, check.status, check.detail) == ("reward range", status, detail)
    if values is None:
        assert check.values == {}
    elif math.isnan(rewards[-1]):  # min and max of a list with NaN depend on its place: not pinned
        assert check.values["declared"] == values["declared"]
    else:
        assert check.values == values


ENDINGS = [
    ([], None, "warn", "no episode ended (0 terminated, 0 truncated)", (0, 0, 0)),
    (
        [(False, False), (False, False)],
        None,
        "warn",
        "no episode ended (0 terminated, 0 truncated, 2 still running after 7 steps)",
        (0, 0, 2),
    ),
    (
        [(True, False), (False, True), (False, True), (False, False)],
        "refused (EXECUTION_ERROR)",
        "pass",
        "1 terminated, 2 truncated, 1 still running after 7 steps; a step after the end was refused "
        "(EXECUTION_ERROR)",
        (1, 2, 1),
    ),
    ([(True, False)], None, "pass", "1 terminated, 0 truncated", (1, 0, 0)),
    (
        [(True, False), (False, True)],
        "accepted",
        "warn",
        "1 terminated, 1 truncated; a step after the end was accepted as if the game went on",
        (1, 1, 0),
    ),
    (
        [(True, True), (True, True), (False, True)],
        "accepted",
        "fail",
        "2 episodes were terminated and truncated at once; 0 terminated, 1 truncated",
        (0, 1, 0),
    ),
]


@pytest.mark.parametrize(("endings", "after_end", "status", "detail", "counts"), ENDINGS)
def test_the_endings_rule_on_each_branch(endings, after_end, status, detail, counts):
    from openenv_lab.report_card import _endings

    check = _endings(endings, after_end, max_steps=7)
    assert (check.name, check.status, check.detail) == ("episode endings", status, detail)
    terminated, truncated, running = counts
    assert check.values == {
        "terminated": terminated,
        "truncated": truncated,
        "still running": running,
        "after_end": after_end,
    }


@pytest.mark.slow
def test_an_official_environment_gets_its_card_and_the_cli_exits_one_when_a_check_fails(
    official_grid_world, capsys
):
    code = main(["check", official_grid_world, "--json", "--episodes", "2", "--steps", "5"])
    card = json.loads(capsys.readouterr().out)
    checks = {c["name"]: c for c in card["checks"]}
    assert checks["openenv validate"]["status"] == "pass"
    assert checks["determinism"]["status"] == "warn"  # deterministic, but it does not confirm seeds
    # Its reset() takes no episode_id, which openenv.validation's state contract requires it to keep.
    assert checks["state contract"]["status"] == "fail" and "episode_id" in checks["state contract"]["detail"]
    assert checks["capacity"]["values"]["max_sessions"] == 1
    assert checks["random baseline"]["status"] == "info"  # played on its one session, not refused a second
    assert card["passed"] is False and code == 1


def test_the_cli_passes_on_a_good_server_and_says_why_it_cannot_start(capsys):
    assert main(["check", "echo", "--episodes", "2", "--steps", "5", "--no-validate"]) == 0
    assert "all checks passed" in capsys.readouterr().out
    assert main(["check", "chesss", "--no-validate"]) == 2
    assert capsys.readouterr().err.startswith("openenv-lab check: Unknown environment 'chesss'")
    assert main(["check", "http://127.0.0.1:9", "--no-validate"]) == 2
    assert "openenv-lab check:" in capsys.readouterr().err


def test_the_card_shows_itself_in_a_notebook():
    card = openenv_lab.check("echo", validate=False, max_steps=2, **QUICK)
    page = card._repr_html_()
    assert page.count("<tr>") == len(card.checks) and "all checks passed" in page
    assert json.loads(card.to_json())["passed"] is True


def test_the_observation_schema_check_names_where_an_observation_breaks_it():
    """Its branches in isolation (survivors of a mutmut pass over report_card.py): no observation model
    at all, the path inside a nested observation, and the envelope fields (reward, done, metadata) that
    travel beside the observation, never in it, even where a schema requires them."""
    from openenv_lab.report_card import _observation_schema

    missing = _observation_schema({"action": {}}, [{"x": 1}])
    assert (missing.status, missing.detail) == ("fail", "/schema has no observation model")
    schema = {
        "observation": {
            "type": "object",
            "properties": {
                "board": {
                    "type": "object",
                    "properties": {"cells": {"type": "array", "items": {"type": "integer"}}},
                },
                "done": {"type": "boolean"},
            },
            "required": ["board", "done"],
        }
    }
    fine = _observation_schema(schema, [{"board": {"cells": [1, 2]}}, None])
    assert fine.status == "pass" and fine.values == {"observations": 1}
    broken = _observation_schema(schema, [{"board": {"cells": [1]}}, {"board": {"cells": [1, "x"]}}])
    assert broken.status == "fail"
    assert broken.detail == "observation 1: board/cells/1: 'x' is not of type 'integer'"
    whole = _observation_schema(schema, [[1, 2]])
    assert whole.detail.startswith("observation 0: the observation: [1, 2] is not of type 'object'")


def test_fields_an_adapter_keeps_out_of_info_are_not_required_there():
    """The Atari family keeps the screen out of ``info["raw_observation"]`` (it is the observation): the
    schema check must not call that a server breaking its schema (as it did on the official atari_env)."""
    from openenv_lab.adapters import AtariAdapter
    from openenv_lab.report_card import _observation_schema

    schema = {
        "observation": {
            "type": "object",
            "properties": {"screen": {"type": "array"}, "lives": {"type": "integer"}},
            "required": ["screen", "lives"],
        }
    }
    seen = [{"lives": 3}]
    assert _observation_schema(schema, seen).status == "fail"
    assert _observation_schema(schema, seen, AtariAdapter.raw_fields_left_out).status == "pass"
    assert _observation_schema(schema, [{"screen": []}], AtariAdapter.raw_fields_left_out).status == "fail"


def test_a_card_reads_the_same_as_text_html_and_json_word_for_word():
    """The card's three faces on a card built by hand (mutations this guards, from the mutmut pass over
    report_card.py: the JSON's key names, the heading's URL-or-target, the summary line, the HTML's
    verdict and closing tag, a non-JSON value written as its text, the KeyError naming the checks)."""
    from openenv_lab.report_card import Check

    checks = [
        Check("check_env", "pass", "passes", {"n": np.int64(3)}),
        Check("rewards sent", "fail", "2 of 6 steps (33%) had no reward", {"missing": 2, "at": object}),
        Check("determinism", "warn", "<the same> & more"),
    ]
    card = ReportCard("echo", "openenv/echo", "http://127.0.0.1:1", checks)
    assert str(card) == (
        "Report card: openenv/echo at http://127.0.0.1:1\n"
        "  ✓ check_env     pass  passes\n"
        "  ✗ rewards sent  fail  2 of 6 steps (33%) had no reward\n"
        "  ! determinism   warn  <the same> & more\n"
        "  FAILED: rewards sent"
    )
    assert str(ReportCard("http://x:1", "openenv/remote", None, checks[:1])).splitlines() == [
        "Report card: openenv/remote at http://x:1",
        "  ✓ check_env  pass  passes",
        "  all checks passed",
    ]
    page = card._repr_html_()
    assert page.startswith(
        '<div><p style="font:14px sans-serif"><b>Report card: openenv/echo at http://127.0.0.1:1</b>: '
        "some checks FAILED</p>"
    )
    assert page.endswith("</table></div>") and page.count("<tr>") == 3
    assert "<td>&lt;the same&gt; &amp; more</td>" in page
    passing = ReportCard("http://x:1", "r", None, checks[:1])._repr_html_()
    assert "http://x:1</b>: all checks passed" in passing
    assert json.loads(card.to_json()) == {
        "target": "echo",
        "env_id": "openenv/echo",
        "base_url": "http://127.0.0.1:1",
        "passed": False,
        "checks": [
            {"name": "check_env", "status": "pass", "detail": "passes", "values": {"n": 3}},
            {
                "name": "rewards sent",
                "status": "fail",
                "detail": "2 of 6 steps (33%) had no reward",
                "values": {"missing": 2, "at": "<class 'object'>"},
            },
            {"name": "determinism", "status": "warn", "detail": "<the same> & more", "values": {}},
        ],
    }
    assert card["determinism"] is checks[2]
    assert card.to_json().startswith('{\n  "target": "echo",\n  "env_id"')  # indented by two
    assert "</tr><tr>" in page
    two = ReportCard("t", "e", None, [Check("a", "fail", "x"), Check("b", "fail", "y")])
    assert str(two).endswith("\n  FAILED: a, b")
    with pytest.raises(KeyError, match=r"No check named 'speed'; the card has \['check_env', 'rewards sent'"):
        card["speed"]


def test_openenv_validate_says_why_it_did_not_run_or_gave_no_report(monkeypatch):
    """The branches of ``openenv validate`` that a machine with the openenv package and a quick server
    never reaches (mutations this guards: the skip's status and words; the timeout's and the missing
    report's failures): the package missing, the command running past its 180 s, and printing no JSON."""
    import importlib.util
    import subprocess

    from openenv_lab import report_card

    real = importlib.util.find_spec
    with monkeypatch.context() as patch:
        patch.setattr(
            importlib.util, "find_spec", lambda name, *a: None if name == "openenv" else real(name, *a)
        )
        skipped = report_card._openenv_validate("http://127.0.0.1:9")
    assert (skipped.name, skipped.status, skipped.detail) == (
        "openenv validate",
        "skip",
        "the openenv package is not installed (pip install openenv)",
    )

    def too_slow(*args, **kwargs):
        assert kwargs["timeout"] == 180  # what the card then says
        raise subprocess.TimeoutExpired(args[0], kwargs["timeout"])

    monkeypatch.setattr(report_card.subprocess, "run", too_slow)
    late = report_card._openenv_validate("http://127.0.0.1:9")
    assert (late.name, late.status) == ("openenv validate", "fail")
    assert late.detail == "openenv validate --url did not finish within 180 s"
    monkeypatch.setattr(
        report_card.subprocess,
        "run",
        lambda args, **kwargs: subprocess.CompletedProcess(args, 1, stdout="", stderr="  Traceback: boom\n"),
    )
    silent = report_card._openenv_validate("http://127.0.0.1:9")
    assert (silent.status, silent.detail) == (
        "fail",
        "openenv validate --url printed no report: Traceback: boom",
    )


def test_the_small_rules_word_for_word():
    """`_rewards_sent`, `_determinism` and `_sessions` in isolation, each branch word for word (their
    mutants otherwise reach only through whole cards on servers, where a word or a count can change
    unnoticed)."""
    from types import SimpleNamespace

    from openenv_lab.report_card import _determinism, _rewards_sent, _sessions

    assert (_rewards_sent([]).status, _rewards_sent([]).detail) == ("skip", "no step was played")
    missing = _rewards_sent([False, True, False, True, False, False])
    assert (missing.status, missing.values) == ("fail", {"missing": 2, "steps": 6, "share": 2 / 6})
    assert missing.detail == (
        "no reward (null, or not a finite number) on 2 of 6 steps (33%); a trainer sees 0.0 there"
    )
    sent = _rewards_sent([False] * 3)
    assert (sent.status, sent.detail) == ("pass", "a reward on each of the 3 steps")
    assert sent.values == {"missing": 0, "steps": 3, "share": 0.0}

    def report(honoured, note):
        return SimpleNamespace(seeds_honoured=honoured, seed_note=note)

    ignored = _determinism(report(False, "two seeded runs differed"))
    assert (ignored.name, ignored.status) == ("determinism", "fail")
    assert ignored.detail == "two seeded runs differed: results cannot be reproduced from a seed"
    confirmed = _determinism(report(True, "the server confirms each seed"))
    assert (confirmed.status, confirmed.detail) == ("pass", "the server confirms each seed")
    unconfirmed = _determinism(report(True, "the same seed replayed the same"))
    assert (unconfirmed.status, unconfirmed.detail) == ("warn", "the same seed replayed the same")
    assert [_sessions(n) for n in (None, 0, 1, 2)] == ["? sessions", "0 sessions", "1 session", "2 sessions"]
    assert {c.name for c in (_rewards_sent([]), missing, sent)} == {"rewards sent"}
    assert {c.name for c in (ignored, confirmed, unconfirmed)} == {"determinism"}


def test_the_observation_schema_check_word_for_word(monkeypatch):
    """`_observation_schema`'s name on every branch, its pass line, a model with neither properties nor
    required fields, a long error cut at 200 characters, and the branch without jsonschema."""
    import sys

    from openenv_lab.report_card import _observation_schema

    bare = _observation_schema({"observation": {"type": "object"}}, [{"x": 1}, None, {"y": 2}])
    assert (bare.name, bare.status, bare.detail) == (
        "observation schema",
        "pass",
        "2 observations match /schema",
    )
    assert bare.values == {"observations": 2}
    assert _observation_schema({}, [{}]).name == "observation schema"
    typed = {"observation": {"type": "object", "properties": {"n": {"type": "integer"}}}}
    long = _observation_schema(typed, [{"n": "x" * 500}])
    assert long.name == "observation schema" and long.detail.startswith("observation 0: n: 'xxx")
    assert len(long.detail) == len("observation 0: n: ") + 200
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # import jsonschema raises ImportError
    without = _observation_schema(typed, [{"n": 1}])
    assert (without.name, without.status, without.detail) == (
        "observation schema",
        "skip",
        "jsonschema is not installed",
    )


def test_openenv_validates_report_is_read_criterion_by_criterion(monkeypatch):
    """How the card reads ``openenv validate --json`` (its real output is read by the echo card above):
    the command it runs, a pass, a required criterion failed, an optional one failed, and an overall
    failure that names no criterion (mutations of `_openenv_validate`'s reading that a passing server
    never shows)."""
    import subprocess
    import sys

    from openenv_lab import report_card

    calls = []

    def replying(report):
        def run(args, **kwargs):
            calls.append((args, kwargs))
            return subprocess.CompletedProcess(args, 0, stdout=json.dumps(report), stderr="")

        return run

    criteria = [
        {"id": "runtime.reset", "required": True, "passed": True},
        {"id": "docs.readme", "required": False, "passed": False},
    ]
    monkeypatch.setattr(report_card.subprocess, "run", replying({"passed": True, "criteria": criteria}))
    passed = report_card._openenv_validate("http://127.0.0.1:9")
    assert calls == [
        (
            [sys.executable, "-m", "openenv.cli", "validate", "--url", "http://127.0.0.1:9", "--json"],
            {"capture_output": True, "text": True, "timeout": 180},
        )
    ]
    assert (passed.name, passed.status, passed.detail) == (
        "openenv validate",
        "pass",
        "2 of 2 criteria passed",
    )
    assert passed.values == {"criteria": {"runtime.reset": True, "docs.readme": False}, "profile": None}
    failing = [
        {"id": "runtime.reset", "required": True, "passed": False},
        {"id": "runtime.state", "required": True, "passed": False},
        {"id": "docs.readme", "required": False, "passed": False},
    ]
    report = {"passed": False, "criteria": failing, "standard_profile": "simulation"}
    monkeypatch.setattr(report_card.subprocess, "run", replying(report))
    failed = report_card._openenv_validate("http://127.0.0.1:9")
    assert (failed.name, failed.status) == ("openenv validate", "fail")
    assert failed.detail == "failed: runtime.reset, runtime.state"
    assert failed.values["profile"] == "simulation"
    monkeypatch.setattr(report_card.subprocess, "run", replying({"passed": True, "criteria": failing[:1]}))
    assert report_card._openenv_validate("http://127.0.0.1:9").detail == "failed: runtime.reset"
    monkeypatch.setattr(report_card.subprocess, "run", replying({"passed": False}))
    unnamed = report_card._openenv_validate("http://127.0.0.1:9")
    assert (unnamed.status, unnamed.detail) == ("fail", "failed: see the report")
    assert unnamed.values == {"criteria": {}, "profile": None}


# The state contract and the step after the end, each branch seen on a server that breaks it (the ledger of
# tests/peers/framework_app.py, one fault per reset). Mutations these guard: any branch's verdict or words
# changed, the episode_id or the step counts not compared (or compared only at the reset), a count that
# grows by two a step failed or passed instead of warned about, a one-step episode stepped past its end,
# an error reading the state not caught, a step after the end answered done (or too slowly) reported as
# refused or accepted.
STATE_FAULTS = [
    ("", "pass", "the reset's episode_id, and a step_count that counts the steps", [0, 1, 2]),
    ("short", "pass", "the reset's episode_id, and a step_count that counts the steps", [0, 1]),
    (
        "double",
        "warn",
        "step_count went [0, 2, 4] over 2 steps: it counts more than the agent's steps (an opponent's moves "
        "too?); openenv.validation's state contract wants one per step",
        [0, 2, 4],
    ),
    ("stuck", "fail", "step_count went [0, 0, 0] over 2 steps", [0, 0, 0]),
    ("wordy", "fail", "step_count is not an integer: ['none', 'one', 'two']", ["none", "one", "two"]),
    ("uncounted", "fail", "the state lacks ['step_count']: it has ['episode_id']", None),
    ("counted-late", "fail", "the state lacks ['step_count']: it has ['episode_id']", None),
    (
        "no-state",
        "fail",
        "reset(episode_id=...) or state() failed: The server at {ws}/ws reported EXECUTION_ERROR: the "
        "ledger is locked. The environment raised while handling the request; the session is still open",
        None,
    ),
]


def ledger_adapter(fault: str):
    """The generic adapter, sending the ledger's ``fault`` with every reset."""
    from openenv_lab.adapters import GenericAdapter

    adapter = GenericAdapter()
    adapter.reset_options = {"fault": fault}
    return adapter


def ledger(url: str, fault: str, **kwargs):
    return gym.make("openenv/remote", base_url=url, adapter=ledger_adapter(fault), **kwargs)


@pytest.mark.parametrize(("fault", "status", "detail", "counts"), STATE_FAULTS)
def test_the_state_contract_on_each_branch(framework_ledger, fault, status, detail, counts):
    from openenv_lab.report_card import _state_contract

    env = ledger(framework_ledger, fault)
    try:
        check = _state_contract(env)
    finally:
        env.close()
    assert check.name == "state contract"
    assert (check.status, check.detail) == (status, detail.format(ws=framework_ledger.replace("http", "ws")))
    if counts is None:
        assert check.values == {}
    else:
        ids = check.values["episode_ids"]
        assert check.values["step_counts"] == counts
        assert len(ids) == len(counts) and len(set(ids)) == 1 and ids[0].startswith("report-card-")


@pytest.mark.parametrize(
    ("fault", "when"), [("forgets-id", "after the reset"), ("drifts-id", "after 1 step")]
)
def test_a_state_that_forgets_the_resets_episode_id_fails_the_contract(framework_ledger, fault, when):
    from openenv_lab.report_card import _state_contract

    env = ledger(framework_ledger, fault)
    try:
        check = _state_contract(env)
    finally:
        env.close()
    ids = check.values["episode_ids"]
    kept = ids[0] if fault == "forgets-id" else ids[1]  # the first one that is not the reset's
    assert (check.name, check.status) == ("state contract", "fail") and not kept.startswith("report-card-")
    assert len(set(ids)) == (1 if fault == "forgets-id" else 3)
    assert check.detail == (
        f"the reset's episode_id was not kept (the state says {kept!r} {when}); openenv.validation's state "
        "contract requires it"
    )
    assert check.values["step_counts"] == [0, 1, 2]


def test_the_state_contract_plays_legal_moves_where_the_server_lists_them(framework_pile):
    from openenv_lab.report_card import _state_contract

    env = gym.make("openenv/remote", base_url=framework_pile)
    try:
        check = _state_contract(env)  # an illegal id would be an error reply, and a failed check
    finally:
        env.close()
    assert (check.status, check.values["step_counts"]) == ("pass", [0, 1, 2]), check


@pytest.mark.parametrize(
    ("fault", "after_end"),
    [
        ("", "refused (EXECUTION_ERROR)"),
        ("short", "refused (EXECUTION_ERROR)"),
        ("done-again", "answered done again"),
        ("slow-after-end", "ended the session (Timeout)"),
    ],
)
def test_what_a_step_after_the_end_gets_is_reported(framework_ledger, fault, after_end):
    from openenv_lab.report_card import _episodes

    env = ledger(framework_ledger, fault, timeouts=1.0)
    try:
        observations, rewards, missing, endings, said = _episodes(env, episodes=2, max_steps=10)
    finally:
        env.close()
    steps = 1 if fault == "short" else 3
    assert said == after_end
    assert endings == [(True, False), (True, False)]
    assert rewards == [1.0 if fault else 0.0] * (2 * steps) and missing == [False] * (2 * steps)
    # Each episode's reset and steps, as the server sent them.
    assert [o["entries"] for o in observations] == [*range(steps + 1)] * 2


def test_the_cards_random_episodes_are_seeded_and_twenty_by_default(framework_ledger):
    """Each random episode's reset sends its own seed (0, 1, 2, ...), so two cards of one server play the
    same episodes, and a card plays 20 of them unless told (mutations: ``reset(seed=None)``, another
    default). The ledger's ``pays-seed`` rewards each step with its reset's seed."""
    from openenv_lab.report_card import _episodes

    env = ledger(framework_ledger, "pays-seed")
    try:
        _, rewards, _, endings, _ = _episodes(env, episodes=3, max_steps=10)
    finally:
        env.close()
    assert rewards == [0.0] * 3 + [1.0] * 3 + [2.0] * 3 and endings == [(True, False)] * 3
    card = openenv_lab.check(framework_ledger, adapter=ledger_adapter("pays-seed"), validate=False, steps=5)
    assert card["reward range"].detail == "observed +0 to +19; no range declared"
    assert card["episode endings"].detail.startswith("20 terminated, 0 truncated")


def test_a_card_of_a_server_behind_a_token_measures_it_with_that_token():
    """The card's options reach each of its parts: the latency and capacity measurement (``bench``) too,
    which without the token is refused by the server (a mutation that dropped them there survived)."""
    with openenv_lab.serve("echo", token="card-token", max_steps=5) as fleet:
        card = openenv_lab.check(fleet.urls[0], token="card-token", validate=False, episodes=2, steps=5)
    assert card.passed, card
    assert card["latency"].values["p50_ms"] > 0 and card["capacity"].values["max_sessions"] > 0
    assert card["random baseline"].values["episodes"] == 2


def test_a_cards_random_episodes_play_the_moves_the_observations_mask_allows():
    """Chess's observation carries the legal moves' mask: the card's random episodes draw from it, so four
    random plies earn nothing (a mutation that drew from the whole move space played illegal moves, each
    penalised -0.1 by the server, and the card still passed)."""
    card = openenv_lab.check("openenv/chess", validate=False, episodes=2, steps=5, max_episode_steps=4)
    assert card["reward range"].detail == "observed +0 to +0, within -1 to +1"


def test_a_card_made_with_an_adapter_instance_plays_its_baseline_on_that_session(framework_ledger, capsys):
    # The adapter instance serves one session: the baseline plays on one env, not a vector env of copies.
    # The whole card, check by check, as `check` assembles it (mutations of its own texts, values and order).
    card = openenv_lab.check(
        framework_ledger, adapter=ledger_adapter("stuck"), validate=False, episodes=2, steps=5
    )
    assert (card.target, card.env_id, card.base_url) == (framework_ledger, "openenv/remote", framework_ledger)
    assert not card.passed
    details = {check.name: (check.status, check.detail) for check in card.checks}
    latency = details.pop("latency")
    assert details == {
        "openenv validate": ("skip", "not asked"),
        "gymnasium check_env": ("pass", "passes"),
        "determinism": ("pass", "the same seed replays the episode, and the server confirms applying it"),
        "state contract": ("fail", "step_count went [0, 0, 0] over 2 steps"),
        "observation schema": ("pass", "8 observations match /schema"),
        "rewards sent": ("pass", "a reward on each of the 6 steps"),
        "reward range": ("info", "observed +1 to +1; no range declared"),
        "episode endings": (
            "pass",
            "2 terminated, 0 truncated; a step after the end was refused (EXECUTION_ERROR)",
        ),
        "capacity": ("info", "8 sessions (found by opening sessions until the server refused)"),
        # Three steps of 1.0 a step: the fault was sent with the baseline's resets too.
        "random baseline": (
            "info",
            "mean return +3 (95% CI +3 to +3) over 2 random episodes (masked where there is a mask)",
        ),
    }
    assert latency[0] == "info"
    assert re.fullmatch(
        r"p50 \d+\.\d\d ms, p95 \d+\.\d\d ms per step over 5 steps; [\d,]+ bytes per step", latency[1]
    )
    values = card["latency"].values
    assert sorted(values) == ["bytes_per_step", "p50_ms", "p95_ms"]
    assert 0 < values["p50_ms"] <= values["p95_ms"] and values["bytes_per_step"] > 0
    assert card["capacity"].values == {"max_sessions": 8}
    assert card["random baseline"].values == {
        "mean": 3.0,
        "ci_low": 3.0,
        "ci_high": 3.0,
        "episodes": 2,
        "failed": 0,
    }
    assert "masked-random on" not in capsys.readouterr().err  # no progress bar unless asked


def test_a_baseline_that_cannot_be_played_fails_saying_why():
    from openenv_lab.report_card import _baseline

    check = _baseline("openenv/remote", "http://127.0.0.1:9", 2, 1, False, {})
    assert (check.name, check.status, check.values) == ("random baseline", "fail", {})
    assert check.detail.startswith(
        "the evaluation failed: Server http://127.0.0.1:9: Could not connect to http://127.0.0.1:9/capacity"
    )


def test_episodes_that_never_end_skip_the_baseline_and_are_counted_as_running(framework_ledger):
    card = openenv_lab.check(framework_ledger, validate=False, episodes=2, steps=5, max_episode_steps=2)
    assert card["random baseline"].status == "skip"
    assert card["random baseline"].detail == "no random episode ended within 2 steps, so none is played whole"
    assert card["episode endings"].values["still running"] == 2
    assert (card["episode endings"].status, card["episode endings"].detail) == (
        "warn",
        "no episode ended (0 terminated, 0 truncated, 2 still running after 2 steps)",
    )
    assert card["rewards sent"].values == {"missing": 0, "steps": 4, "share": 0.0}


@pytest.mark.parametrize(
    ("target", "base_url", "made"),
    [
        ("http://127.0.0.1:9", None, ("openenv/remote", "http://127.0.0.1:9")),
        ("https://example.org", None, ("openenv/remote", "https://example.org")),
        ("ws://127.0.0.1:9", None, ("openenv/remote", "ws://127.0.0.1:9")),
        ("wss://127.0.0.1:9", "http://x", ("openenv/remote", "wss://127.0.0.1:9")),
        ("chess", None, ("openenv/chess", None)),
        ("openenv/chess", "http://127.0.0.1:9", ("openenv/chess", "http://127.0.0.1:9")),
    ],
)
def test_what_a_card_is_made_for(target, base_url, made):
    from openenv_lab.report_card import _target

    assert _target(target, base_url) == made


def test_an_unknown_target_names_the_known_ones():
    from openenv_lab.report_card import _target

    with pytest.raises(
        ValueError, match=r"^Unknown environment 'openenv/nope': give a server's URL, or one of \["
    ) as caught:
        _target("openenv/nope", None)
    assert "'openenv/chess'" in str(caught.value) and "'openenv/remote'" in str(caught.value)
    assert "'CartPole-v1'" not in str(caught.value)


def test_check_env_fails_when_the_server_refuses_what_the_checker_sent(framework_ledger):
    from openenv_lab.report_card import _check_env

    env = ledger(framework_ledger, "picky")
    try:
        check = _check_env(env)
    finally:
        env.close()
    ws = framework_ledger.replace("http", "ws")
    assert (check.name, check.status) == ("gymnasium check_env", "fail")
    # The server's words, cut at 300 characters (the server's reply is longer).
    said = f"The server at {re.escape(ws)}/ws reported EXECUTION_ERROR: move [01] is not to my taste, (no, )+"
    prefix = "the server refused what the checker sent: "
    assert check.detail.startswith(prefix) and len(check.detail) == len(prefix) + 300, check.detail
    assert re.fullmatch(f"{prefix}{said}n?o?,?", check.detail), check.detail


class Loose(gym.Env):
    """Unbounded Box observations (gymnasium's checker warns twice) and a long warning of its own, coloured
    and on two lines, at every reset."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        warnings.warn("\x1b[33m" + "z" * 130 + "\nsecond line\x1b[0m", UserWarning, stacklevel=1)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, True, False, {}


def test_check_env_warnings_are_reported_once_each_uncoloured_first_line_only():
    from openenv_lab.report_card import _check_env

    check = _check_env(Loose())
    assert (check.name, check.status, check.values) == ("gymnasium check_env", "warn", {})
    assert check.detail == (
        "passes, with warnings: WARN: A Box observation space maximum value is infinity. This is probably "
        "too high.; WARN: A Box observation space minimum value is -infinity. This is probably too low.; "
        + "z"
        * 120
    )


class OutOfSpace(Loose):
    """Observations outside its Box; with ``say``, an assertion of its own (long, on two lines) at reset."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def __init__(self, say: str | None = None) -> None:
        self.say = say

    def reset(self, *, seed=None, options=None):
        gym.Env.reset(self, seed=seed)
        assert self.say is None, self.say
        return np.full(2, 5.0, np.float32), {}


@pytest.mark.parametrize(
    ("say", "detail"),
    [
        (None, "The first element returned by `env.reset()` is not within the observation space."),
        ("y" * 400 + "\nsecond line", "y" * 300),
    ],
)
def test_check_env_failures_are_reported_by_their_first_line(say, detail):
    from openenv_lab.report_card import _check_env

    check = _check_env(OutOfSpace(say))
    assert (check.name, check.status, check.detail, check.values) == (
        "gymnasium check_env",
        "fail",
        detail,
        {},
    )


def test_the_cards_random_episodes_replay_and_play_legal_moves(framework_pile):
    """The same seeds draw the same moves, among the legal ones the server lists (an illegal id is an error
    reply, which would end the card). Mutations: the action space or the resets left unseeded, the
    observation or the info (where the legal moves are) not given to the random policy."""
    from openenv_lab.report_card import _episodes

    env = gym.make("openenv/remote", base_url=framework_pile)
    try:
        first, again = _episodes(env, 5, 20), _episodes(env, 5, 20)
    finally:
        env.close()
    assert first == again
    observations, rewards, missing, endings, after_end = first
    assert endings == [(True, False)] * 5 and after_end == "refused (EXECUTION_ERROR)"
    assert len(observations) == len(rewards) + 5 and not any(missing)
    assert {o["pile"] for o in observations} >= {10, 0} and set(rewards) <= {-1.0, 0.0, 1.0}


def test_an_id_with_a_base_url_is_checked_on_that_server(framework_ledger):
    card = openenv_lab.check("remote", base_url=framework_ledger, validate=False, episodes=1, steps=2)
    assert (card.target, card.env_id, card.base_url) == ("remote", "openenv/remote", framework_ledger)
    assert card.passed, str(card)
