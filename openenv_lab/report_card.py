"""`check`: a report card for any OpenEnv server, for its users and for its authors' CI.

``openenv_lab.check("openenv/chess")`` (or a URL, or ``openenv-lab check URL_OR_ID``) runs what a user
would want to know before training on an environment, and says for each check whether it passed:

========================  ===============================================================================
check                     what it looks at
========================  ===============================================================================
openenv validate          the official runtime criteria (``openenv validate --url``: health, metadata,
                          schema, MCP, routes), run by openenv's own command line where it is installed
gymnasium check_env       gymnasium's checker on the environment, through our adapter
determinism               two runs with one seed give the same trajectory; whether the server confirms it
state contract            ``state`` has an ``episode_id`` and a ``step_count`` that counts the steps
observation schema        every observation seen matches the server's ``/schema``
rewards sent              every step carries a finite reward (``null`` or NaN would reach a trainer as 0.0)
reward range              the rewards seen, against the range declared (``reward_range=``, or the adapter's)
episode endings           never terminated and truncated at once; what a step after the end gets
capacity                  sessions the server accepts (``/capacity``, or by opening sessions)
latency                   step latency p50 and p95, bytes per step
random baseline           the random (masked where there is a mask) policy's mean return, with its interval
========================  ===============================================================================

A check's status is ``pass``, ``warn`` (works, with something the user should know), ``fail``, ``info``
(a measurement) or ``skip`` (with the reason). `ReportCard.passed` is False when any check failed, and
the command line then exits with status 1, so the card can gate an environment repository's CI. The card
prints as text, shows as a table in Jupyter, and serialises to JSON (`ReportCard.as_dict`).

openenv 0.10's ``openenv.validation`` also has package-level runtime graders (``reward_well_formed``,
``observation_schema``, ``state_contract``, ``network_policy``); they validate an environment's package
directory, building its Docker image, not a running server. The card runs its own versions of the first
three against the running server, and ``openenv validate --url`` for the official criteria.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import re
import subprocess
import sys
import uuid
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env

from .adapters.schema import ENVELOPE_FIELDS
from .bench import bench, random_action
from .client import OpenEnvError, ServerError
from .evaluation import evaluate

__all__ = ["Check", "ReportCard", "check"]

STATUSES = ("pass", "warn", "fail", "info", "skip")
_MARKS = {"pass": "✓", "warn": "!", "fail": "✗", "info": "·", "skip": "-"}
_COLOURS = {"pass": "#1a7f37", "warn": "#9a6700", "fail": "#cf222e", "info": "#57606a", "skip": "#57606a"}


@dataclass
class Check:
    """One line of the card: its name, status, what was found, and the numbers behind it."""

    name: str
    status: str
    detail: str
    values: dict[str, Any] = field(default_factory=dict)


@dataclass
class ReportCard:
    """The checks run on one environment, and whether none failed.

    Example:
        >>> import openenv_lab
        >>> card = openenv_lab.check("openenv/echo", episodes=4, steps=20, max_steps=5)
        >>> card.passed, [c.status for c in card.checks if c.name == "determinism"]
        (True, ['pass'])
    """

    target: str
    env_id: str
    base_url: str | None
    checks: list[Check]

    @property
    def passed(self) -> bool:
        return not any(c.status == "fail" for c in self.checks)

    def __getitem__(self, name: str) -> Check:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(f"No check named {name!r}; the card has {[c.name for c in self.checks]}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "env_id": self.env_id,
            "base_url": self.base_url,
            "passed": self.passed,
            "checks": [asdict(c) for c in self.checks],
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, default=_jsonable)

    def __str__(self) -> str:
        width = max(len(c.name) for c in self.checks)
        lines = [f"Report card: {self.env_id} at {self.base_url or self.target}"]
        lines += [f"  {_MARKS[c.status]} {c.name:<{width}}  {c.status:<4}  {c.detail}" for c in self.checks]
        failed = [c.name for c in self.checks if c.status == "fail"]
        lines.append("  " + ("all checks passed" if not failed else f"FAILED: {', '.join(failed)}"))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html

        rows = "".join(
            f'<tr><td style="color:{_COLOURS[c.status]};font-weight:600">{_MARKS[c.status]} {c.status}</td>'
            f"<td>{html.escape(c.name)}</td><td>{html.escape(c.detail)}</td></tr>"
            for c in self.checks
        )
        verdict = "all checks passed" if self.passed else "some checks FAILED"
        return (
            f'<div><p style="font:14px sans-serif"><b>Report card: {html.escape(self.env_id)} at '
            f"{html.escape(self.base_url or self.target)}</b>: {verdict}</p>"
            f'<table style="border-collapse:collapse;font:13px sans-serif" cellpadding="4">{rows}</table>'
            "</div>"
        )


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def _target(target: str, base_url: str | None) -> tuple[str, str | None]:
    """(env id, base URL) from a URL, an id, or a family name."""
    if target.startswith(("http://", "https://", "ws://", "wss://")):
        return "openenv/remote", target
    env_id = target if "/" in target else f"openenv/{target}"
    if env_id not in gym.registry:
        known = sorted(i for i in gym.registry if i.startswith("openenv/"))
        raise ValueError(f"Unknown environment {target!r}: give a server's URL, or one of {known}")
    return env_id, base_url


def check(
    target: str,
    *,
    base_url: str | None = None,
    episodes: int = 20,
    steps: int = 100,
    reward_range: tuple[float, float] | None = None,
    max_episode_steps: int = 1000,
    validate: bool = True,
    progress: bool = False,
    **options: Any,
) -> ReportCard:
    """The report card of an environment: an id (``"openenv/chess"``, ``"chess"``) on its embedded server
    or at ``base_url``, or any OpenEnv server's URL (through ``openenv/remote``).

    Args:
        episodes: random-policy episodes for the baseline, the reward range and the endings.
        steps: steps timed for the latency.
        reward_range: the range the rewards must stay in; by default the adapter's, if it declares one.
        max_episode_steps: an episode still running after this many steps counts as never ending.
        validate: run ``openenv validate --url`` (a subprocess: seconds).
        **options: the environment's options, as for ``gym.make``.
    """
    env_id, url = _target(target, base_url)
    checks: list[Check] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the card reports what the warnings would say
        # One thing at a time: a server may hold a single session (the official grid_world_env does).
        # Without a URL every step below shares the embedded server of these options (one per process).
        report = bench(env_id, base_url=url, steps=steps, **options)
        served = report.base_url
        checks.append(
            _openenv_validate(served) if validate else Check("openenv validate", "skip", "not asked")
        )
        env = gym.make(env_id, base_url=url, **options)
        try:
            checks.append(_check_env(env))
            checks.append(_determinism(report))
            checks.append(_state_contract(env))
            observations, rewards, missing, endings, after_end = _episodes(env, episodes, max_episode_steps)
            left_out = env.unwrapped.adapter.raw_fields_left_out
            checks.append(_observation_schema(env.unwrapped.client.schema(), observations, left_out))
            checks.append(_rewards_sent(missing))
            declared = reward_range or getattr(env.unwrapped.adapter, "reward_range", None)
            sent = [reward for reward, gone in zip(rewards, missing, strict=True) if not gone]
            checks.append(_reward_range(sent, declared))
            checks.append(_endings(endings, after_end, max_episode_steps))
        finally:
            env.close()
        checks.append(
            Check(
                "capacity",
                "info",
                f"{_sessions(report.max_sessions)} ({report.max_sessions_note})",
                {"max_sessions": report.max_sessions},
            )
        )
        checks.append(
            Check(
                "latency",
                "info",
                f"p50 {report.p50_ms:.2f} ms, p95 {report.p95_ms:.2f} ms per step over {report.steps} steps; "
                f"{report.bytes_per_step:,.0f} bytes per step",
                {"p50_ms": report.p50_ms, "p95_ms": report.p95_ms, "bytes_per_step": report.bytes_per_step},
            )
        )
        sessions = min(8, episodes, report.max_sessions or 1)
        if any(terminated or truncated for terminated, truncated in endings):
            checks.append(_baseline(env_id, url, episodes, sessions, progress, options))
        else:  # whole random episodes would never end: the baseline would wait for ever
            checks.append(
                Check(
                    "random baseline",
                    "skip",
                    f"no random episode ended within {max_episode_steps} steps, so none is played whole",
                )
            )
    return ReportCard(target=target, env_id=env_id, base_url=served, checks=checks)


def _sessions(count: int | None) -> str:
    return "? sessions" if count is None else f"{count} session{'s' if count != 1 else ''}"


def _openenv_validate(url: str) -> Check:
    name = "openenv validate"
    if importlib.util.find_spec("openenv") is None:
        return Check(name, "skip", "the openenv package is not installed (pip install openenv)")
    try:
        out = subprocess.run(
            [sys.executable, "-m", "openenv.cli", "validate", "--url", url, "--json"],
            capture_output=True,
            text=True,
            timeout=180,
        )
        report = json.loads(out.stdout)
    except subprocess.TimeoutExpired:
        return Check(name, "fail", "openenv validate --url did not finish within 180 s")
    except json.JSONDecodeError:
        return Check(name, "fail", f"openenv validate --url printed no report: {out.stderr.strip()[-300:]}")
    criteria = report.get("criteria", [])
    failed = [c["id"] for c in criteria if c.get("required") and not c.get("passed")]
    values = {
        "criteria": {c["id"]: c.get("passed") for c in criteria},
        "profile": report.get("standard_profile"),
    }
    if report.get("passed") and not failed:
        return Check(name, "pass", f"{len(criteria)} of {len(criteria)} criteria passed", values)
    return Check(name, "fail", f"failed: {', '.join(failed) or 'see the report'}", values)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _check_env(env: gym.Env) -> Check:
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env.unwrapped, skip_render_check=True, skip_close_check=True)
    except AssertionError as exc:
        return Check("gymnasium check_env", "fail", str(exc).splitlines()[0][:300])
    except OpenEnvError as exc:  # a sampled action the server refused: the space is wider than the game
        said = str(exc).splitlines()[0][:300]
        return Check("gymnasium check_env", "fail", f"the server refused what the checker sent: {said}")
    # gymnasium colours its warnings for terminals: the card keeps their words only.
    notes = sorted({_ANSI.sub("", str(w.message)).splitlines()[0][:120] for w in caught})
    if notes:
        return Check("gymnasium check_env", "warn", f"passes, with warnings: {'; '.join(notes)}")
    return Check("gymnasium check_env", "pass", "passes")


def _determinism(report: Any) -> Check:
    if not report.seeds_honoured:
        return Check("determinism", "fail", f"{report.seed_note}: results cannot be reproduced from a seed")
    if "confirms" in report.seed_note:
        return Check("determinism", "pass", report.seed_note)
    return Check("determinism", "warn", report.seed_note)


def _state_contract(env: gym.Env) -> Check:
    """openenv.validation's ``runtime.state_contract``: the state names the episode_id the reset gave and
    a ``step_count`` equal to the steps since the reset. A count that grows by more than one a step (the
    opponent's moves counted too, as the official chess_env does) is a warning, not a failure."""
    name = "state contract"
    episode_id = f"report-card-{uuid.uuid4()}"
    try:
        obs, info = env.reset(seed=0, options={"episode_id": episode_id})
        session = env.unwrapped.session
        states = [session.state()]
        for _ in range(2):
            obs, _, terminated, truncated, info = env.step(random_action(env, obs, info))
            states.append(session.state())
            if terminated or truncated:
                break
    except OpenEnvError as exc:
        return Check(name, "fail", f"reset(episode_id=...) or state() failed: {exc}")
    missing = [key for key in ("episode_id", "step_count") if key not in states[0]]
    if missing:
        return Check(name, "fail", f"the state lacks {missing}: it has {sorted(states[0])}")
    counts = [state.get("step_count") for state in states]
    values = {"step_counts": counts, "episode_ids": [state.get("episode_id") for state in states]}
    others = [
        (i, state.get("episode_id"))
        for i, state in enumerate(states)
        if state.get("episode_id") != episode_id
    ]
    if others:
        when, seen = others[0]
        said = (
            f"the reset's episode_id was not kept (the state says {seen!r} "
            f"{'after the reset' if when == 0 else f'after {when} step' + ('s' if when > 1 else '')}); "
            "openenv.validation's state contract requires it"
        )
        return Check(name, "fail", said, values)
    if not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
        return Check(name, "fail", f"step_count is not an integer: {counts}", values)
    if counts == list(range(len(counts))):
        return Check(name, "pass", "the reset's episode_id, and a step_count that counts the steps", values)
    if all(b > a for a, b in itertools.pairwise(counts)):
        return Check(
            name,
            "warn",
            f"step_count went {counts} over {len(counts) - 1} steps: it counts more than the agent's steps "
            "(an opponent's moves too?); openenv.validation's state contract wants one per step",
            values,
        )
    return Check(name, "fail", f"step_count went {counts} over {len(counts) - 1} steps", values)


def _episodes(
    env: gym.Env, episodes: int, max_steps: int
) -> tuple[list[Any], list[float], list[bool], list[tuple[bool, bool]], str | None]:
    """Random episodes: the raw observations seen, the rewards, whether each step's reward was missing
    (the server sent none: the client reports 0.0), how each episode ended, and what the server said to
    one step after the end (``None`` if no episode ended)."""
    observations: list[Any] = []
    rewards: list[float] = []
    missing: list[bool] = []
    endings: list[tuple[bool, bool]] = []
    after_end = None
    env.action_space.seed(0)
    adapter = env.unwrapped.adapter  # the server's observation fields, as they came (last_observation)
    for seed in range(episodes):
        obs, info = env.reset(seed=seed)
        observations.append(dict(adapter.last_observation))
        for _ in range(max_steps):
            action = random_action(env, obs, info)
            obs, reward, terminated, truncated, info = env.step(action)
            observations.append(dict(adapter.last_observation))
            rewards.append(float(reward))
            missing.append(bool(info.get("reward_missing")))
            if terminated or truncated:
                endings.append((bool(terminated), bool(truncated)))
                if after_end is None:
                    after_end = _step_after_end(env, action)
                break
        else:
            endings.append((False, False))
    return observations, rewards, missing, endings, after_end


def _step_after_end(env: gym.Env, action: Any) -> str:
    """Send one more step on the finished episode's session, as a client without our checks would."""
    unwrapped = env.unwrapped
    try:
        result = unwrapped.session.step(unwrapped.adapter.encode_action(action))
    except ServerError as exc:
        return f"refused ({exc.code})"
    except OpenEnvError as exc:
        return f"ended the session ({type(exc).__name__})"
    return "accepted" if not result.done else "answered done again"


def _observation_schema(
    schema: dict[str, Any], observations: list[Any], left_out: tuple[str, ...] = ()
) -> Check:
    """Every observation seen against ``/schema``'s observation model (``left_out``: fields the adapter
    keeps out of what it keeps of the server's observation, not required there)."""
    name = "observation schema"
    try:
        import jsonschema
    except ImportError:
        return Check(name, "skip", "jsonschema is not installed")
    model = dict(schema.get("observation") or {})
    if not model:
        return Check(name, "fail", "/schema has no observation model")
    model["properties"] = {k: v for k, v in model.get("properties", {}).items() if k not in ENVELOPE_FIELDS}
    model["required"] = [
        k for k in model.get("required", []) if k not in ENVELOPE_FIELDS and k not in left_out
    ]
    validator = jsonschema.Draft202012Validator(model)
    seen = [o for o in observations if o is not None]
    for index, observation in enumerate(seen):
        error = next(iter(validator.iter_errors(observation)), None)
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "the observation"
            return Check(name, "fail", f"observation {index}: {where}: {error.message[:200]}")
    return Check(name, "pass", f"{len(seen)} observations match /schema", {"observations": len(seen)})


def _rewards_sent(missing: list[bool]) -> Check:
    """Every step must carry a finite reward: one sent as ``null`` (or as NaN, which JSON encoders turn
    into ``null``) reaches a trainer as 0.0, a reward the environment never gave."""
    name = "rewards sent"
    if not missing:
        return Check(name, "skip", "no step was played")
    count, steps = sum(missing), len(missing)
    values = {"missing": count, "steps": steps, "share": count / steps}
    if count:
        return Check(
            name,
            "fail",
            f"no reward (null, or not a finite number) on {count} of {steps} steps ({count / steps:.0%}); "
            "a trainer sees 0.0 there",
            values,
        )
    return Check(name, "pass", f"a reward on each of the {steps} steps", values)


def _reward_range(rewards: list[float], declared: tuple[float, float] | None) -> Check:
    name = "reward range"
    if not rewards:
        return Check(name, "skip", "no step was played")
    finite = all(math.isfinite(r) for r in rewards)
    low, high = min(rewards), max(rewards)
    values = {"observed": [low, high], "declared": list(declared) if declared else None}
    if not finite:
        return Check(name, "fail", "a reward was not a finite number", values)
    if declared is None:
        return Check(name, "info", f"observed {low:+g} to {high:+g}; no range declared", values)
    if declared[0] <= low and high <= declared[1]:
        return Check(
            name,
            "pass",
            f"observed {low:+g} to {high:+g}, within {declared[0]:+g} to {declared[1]:+g}",
            values,
        )
    return Check(
        name,
        "fail",
        f"observed {low:+g} to {high:+g}, outside the declared {declared[0]:+g} to {declared[1]:+g}",
        values,
    )


def _endings(endings: list[tuple[bool, bool]], after_end: str | None, max_steps: int) -> Check:
    name = "episode endings"
    both = sum(1 for t, u in endings if t and u)
    terminated = sum(1 for t, u in endings if t and not u)
    truncated = sum(1 for t, u in endings if u and not t)
    running = sum(1 for t, u in endings if not t and not u)
    values = {
        "terminated": terminated,
        "truncated": truncated,
        "still running": running,
        "after_end": after_end,
    }
    counts = f"{terminated} terminated, {truncated} truncated"
    if running:
        counts += f", {running} still running after {max_steps} steps"
    if both:
        return Check(name, "fail", f"{both} episodes were terminated and truncated at once; {counts}", values)
    if after_end == "accepted":
        return Check(
            name, "warn", f"{counts}; a step after the end was accepted as if the game went on", values
        )
    if not endings or running == len(endings):
        return Check(name, "warn", f"no episode ended ({counts})", values)
    tail = f"; a step after the end was {after_end}" if after_end else ""
    return Check(name, "pass", counts + tail, values)


def _baseline(
    env_id: str, url: str | None, episodes: int, sessions: int, progress: bool, options: dict[str, Any]
) -> Check:
    name = "random baseline"
    try:
        result = evaluate(
            "masked-random",
            env_id,
            episodes=episodes,
            n_envs=sessions,
            progress=progress,
            base_url=url,
            **options,
        )
    except OpenEnvError as exc:
        return Check(name, "fail", f"the evaluation failed: {exc}")
    s = result.summary()
    values = {key: s[key] for key in ("mean", "ci_low", "ci_high", "episodes", "failed")}
    return Check(
        name,
        "info",
        f"mean return {s['mean']:+.4g} (95% CI {s['ci_low']:+.4g} to {s['ci_high']:+.4g}) over "
        f"{s['episodes']} random episodes (masked where there is a mask)",
        values,
    )
