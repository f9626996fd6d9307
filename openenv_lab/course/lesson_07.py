"""Checks for lesson 7, tasks, tools and other people's environments
(``tutorials/07_tasks_tools_and_specs.ipynb``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import chess
import gymnasium as gym
import numpy as np
import polars as pl
from gymnasium import spaces

from ..adapters import Spec
from ._exercise import Exercise, WatchedEnv

__all__ = ["mate_in_one", "mate_in_two", "nim_policy", "nim_spec", "total_length"]

#: A position with checks but no mate: the queen can give check, the king escapes or takes it.
CHECK_NO_MATE = "4k3/8/8/8/8/8/8/3QK3 w - - 0 1"
#: Mate-in-two tasks of the shipped set where a move that stalemates the defender comes first: an answer
#: that counts "no reply" as "every reply is mated" plays it.
STALEMATE_TRAPS = ("1q6/8/8/K7/3k4/8/2b5/8 b - - 0 1", "2n5/8/B7/Q7/7k/5K2/8/8 w - - 0 1")


def _mates(board: chess.Board, move: chess.Move) -> bool:
    board.push(move)
    try:
        return board.is_checkmate()
    finally:
        board.pop()


def _any_mate(board: chess.Board) -> bool:
    return any(_mates(board, move) for move in board.legal_moves)


def forces_mate_in_two(fen: str, uci: str) -> bool:
    """Whether ``uci`` mates at once, or leaves the defender replies that all allow a mate in one."""
    board = chess.Board(fen)
    move = chess.Move.from_uci(uci)
    if move not in board.legal_moves:
        return False
    board.push(move)
    if board.is_checkmate():
        return True
    replies = list(board.legal_moves)
    if not replies:
        return False  # stalemate
    for reply in replies:
        board.push(reply)
        escaped = not _any_mate(board)
        board.pop()
        if escaped:
            return False
    return True


def _uci(exercise: Exercise, got: Any, fen: str) -> str | None:
    if got is None:
        return None
    if isinstance(got, chess.Move):
        exercise.fail(f"for {fen} it returned a chess.Move ({got}); return its UCI text: `move.uci()`.")
    exercise.require(isinstance(got, str), f"for {fen} it returned {got!r}; return UCI text such as 'd1d8'.")
    try:
        chess.Move.from_uci(got)
    except ValueError:
        exercise.fail(
            f"for {fen} it returned {got!r}, which is not UCI text (from square, to square: 'd1d8')."
        )
    return got


def _split(tasks: pl.DataFrame, name: str, count: int) -> list[str]:
    return tasks.filter(pl.col("split") == name).head(count)["fen"].to_list()


def mate_in_one(answer: Callable[[str], Any], tasks: pl.DataFrame, env: gym.Env | None = None) -> None:
    """Exercise 1: ``answer(fen)`` is a mating move in UCI, or ``None``.

    Tried on 20 ``mate_in_1`` tasks of ``tasks`` (``env.unwrapped.tasks``), on positions without a mate,
    and, if ``env`` (a chess env made with ``tasks="mate_in_1"``) is given, through the server on 5 tasks.
    """
    exercise = Exercise(1, "mate_in_one")
    for fen in _split(tasks, "mate_in_1", 20):
        board = chess.Board(fen)
        move = _uci(exercise, exercise.run(answer, fen), fen)
        exercise.require(move is not None, f"for {fen} it returned None, but a move mates there.")
        played = chess.Move.from_uci(move)
        exercise.require(
            played in board.legal_moves, f"for {fen} it returned {move}, which is not legal there."
        )
        if not _mates(board, played):
            check = board.gives_check(played)
            exercise.fail(
                f"for {fen} it returned {move}, which "
                + ("gives check but does not mate: " if check else "does not mate: ")
                + "after `board.push(move)`, `board.is_checkmate()` must be true."
            )
    for fen in (chess.STARTING_FEN, CHECK_NO_MATE):
        got = _uci(exercise, exercise.run(answer, fen), fen)
        if got is not None:
            board, move = chess.Board(fen), chess.Move.from_uci(got)
            check = move in board.legal_moves and board.gives_check(move)
            exercise.fail(
                f"for {fen} it returned {got}, but no move mates there: return None when none does"
                + (" (a check is not a mate)." if check else ".")
            )
    if env is not None:
        solved = 0
        for _ in range(5):
            _, info = env.reset()
            move = exercise.run(answer, info["fen"])
            _, reward, *_ = env.step(env.unwrapped.adapter.move_to_action(move))
            solved += reward == 1.0
        exercise.require(solved == 5, f"through the server it solved {solved} of 5 tasks.")
    exercise.passed()


def mate_in_two(answer: Callable[[str], Any], tasks: pl.DataFrame) -> None:
    """Exercise 2: ``answer(fen)`` is a first move that forces mate within two moves, or ``None``.

    Tried on 20 ``mate_in_2`` tasks, on the two tasks where a stalemating move comes first, and on the
    start position; every move is verified by the check's own search, whatever the task lists.
    """
    exercise = Exercise(2, "mate_in_two")
    fens = [*_split(tasks, "mate_in_2", 20), *STALEMATE_TRAPS]
    for fen in fens:
        move = _uci(exercise, exercise.run(answer, fen), fen)
        exercise.require(move is not None, f"for {fen} it returned None, but a mate in two exists there.")
        if forces_mate_in_two(fen, move):
            continue
        board = chess.Board(fen)
        played = chess.Move.from_uci(move)
        if played in board.legal_moves:
            board.push(played)
            if not board.is_checkmate() and not any(board.legal_moves):
                exercise.fail(
                    f"for {fen} it returned {move}, which leaves the defender no legal move without giving "
                    "check: stalemate, a draw. A move with no reply at all does not force a mate."
                )
            exercise.fail(
                f"for {fen} it returned {move}, but the defender has a reply after which no move mates. "
                "Every reply must allow a mate in one, not just some."
            )
        exercise.fail(f"for {fen} it returned {move}, which is not a legal move there.")
    got = _uci(exercise, exercise.run(answer, chess.STARTING_FEN), chess.STARTING_FEN)
    exercise.require(got is None, f"for the start position it returned {got}; no mate in two exists there.")
    exercise.passed()


def total_length(answer: Callable[[gym.Env, list[str]], Any], env: gym.Env) -> None:
    """Exercise 3: ``answer(env, words)`` adds up the lengths ``echo_with_length`` reports, one call a word.

    ``env`` is an ``openenv/remote`` env of an MCP echo server, reset.
    """
    exercise = Exercise(3, "total_length")
    for words in (["open", "env", "lab"], [], ["Ünïcode", "", "x" * 40]):
        watched = WatchedEnv(env, exercise)
        got = exercise.run(answer, watched, list(words))
        calls = [info for info in watched.infos if info.get("tool_name")]  # "": a reset, no call
        names = sorted({info["tool_name"] for info in calls})
        if words and not calls:
            exercise.fail(
                "it called no tool: the exercise is to ask the server. Call `echo_with_length` once per word "
                "with `env.step(env.unwrapped.tool_action('echo_with_length', message=word))`."
            )
        exercise.require(
            names in ([], ["echo_with_length"]), f"it called {names}; call `echo_with_length` only."
        )
        exercise.require(
            len(calls) == len(words),
            f"for {len(words)} words it made {len(calls)} tool calls: one call per word.",
        )
        expected = sum(json.loads(info["tool_result"])["length"] for info in calls)
        exercise.require(
            got == expected,
            f"for {words} the tool reported lengths adding up to {expected}, and it returned {got!r}.",
        )
    exercise.passed()


def nim_spec(spec: Any, url: str) -> gym.Env:
    """Exercise 4: ``spec`` makes the Nim server at ``url`` playable. Returns the env it makes."""
    exercise = Exercise(4, "NIM")
    exercise.require(spec is not None, "`NIM` is still None: write the `Spec`.")
    exercise.require(isinstance(spec, Spec), f"`NIM` is a {type(spec).__name__}; make it a `Spec(...)`.")
    exercise.require(spec.name == "nim", f"the spec is named {spec.name!r}; name it 'nim'.")
    env = gym.make("openenv/remote", base_url=url, spec=spec)
    try:
        exercise.require(
            env.action_space == spaces.Discrete(3),
            f"the action space is {env.action_space}; three values (`actions=[1, 2, 3]`) make Discrete(3).",
        )
        encoded = env.unwrapped.adapter.encode_action(0)
        exercise.require(
            encoded == {"take": 1},
            f"action 0 is sent as {encoded}; index 0 must mean one stone: `actions=[1, 2, 3]` in that order.",
        )
        keys = set(env.observation_space.spaces) if isinstance(env.observation_space, spaces.Dict) else set()
        exercise.require(
            "action_mask" in keys,
            "the observation has no action_mask: name the field that lists the legal moves, "
            "`legal_actions='allowed'`.",
        )
        exercise.require(
            keys == {"pile", "action_mask"},
            f"the observation keeps {sorted(keys)}; keep `pile` only (the mask comes with it): "
            "`observation={'pile': ...}`.",
        )
        exercise.require(
            env.observation_space["pile"] == spaces.Discrete(21),
            f"`pile` is {env.observation_space['pile']}; it holds 0 to 20 stones: `spaces.Discrete(21)`.",
        )
        obs, _ = env.reset(seed=1)
        mask = [n <= int(obs["pile"]) for n in (1, 2, 3)]
        exercise.require(
            list(obs["action_mask"]) == mask, f"with {obs['pile']} stones the mask should be {mask}."
        )
    except BaseException:
        env.close()
        raise
    exercise.passed()
    return env


def nim_policy(answer: Callable[[Any], Any], env: gym.Env, games: int = 60) -> tuple[float, float]:
    """Exercise 5: ``answer(obs)`` plays Nim well: the winning take wherever there is one, and wins at
    least 80% of ``games`` seeded games against the server's random opponent (more than random play).
    Returns ``(random play's win rate, the answer's)``."""
    exercise = Exercise(5, "nim_policy")
    for pile in range(1, 21):
        mask = np.array([n <= pile for n in (1, 2, 3)])
        action = exercise.run(answer, {"pile": pile, "action_mask": mask})
        exercise.require(
            isinstance(action, (int, np.integer)),
            f"with {pile} stones it returned {action!r}; return an action index, 0, 1 or 2.",
        )
        action = int(action)
        if pile % 4 and action == pile % 4:
            exercise.fail(
                f"with {pile} stones it returned {action}, which takes {action + 1}. Action index 0 takes "
                "one stone: return `take - 1`."
            )
        exercise.require(
            0 <= action <= 2 and mask[action],
            f"with {pile} stones it returned {action}; return a legal action index (0, 1 or 2, allowed by "
            "the mask).",
        )
        if pile % 4 and action + 1 != pile % 4:
            exercise.fail(
                f"with {pile} stones it took {action + 1}, leaving {pile - action - 1}; take {pile % 4} to "
                "leave a multiple of 4."
            )

    def win_rate(policy: Callable[[Any], Any]) -> float:
        wins = 0
        for seed in range(games):
            obs, _ = env.reset(seed=seed)
            done, reward = False, 0.0
            while not done:
                obs, reward, terminated, truncated, _ = env.step(policy(obs))
                done = terminated or truncated
            wins += reward == 1.0
        return wins / games

    rng = np.random.default_rng(0)
    random_rate = win_rate(lambda obs: int(rng.choice(np.flatnonzero(obs["action_mask"]))))
    policy_rate = win_rate(lambda obs: exercise.run(answer, obs))
    exercise.require(
        policy_rate >= 0.8 and policy_rate > random_rate,
        f"it won {policy_rate:.0%} of {games} games (random play {random_rate:.0%}); the strategy wins 80% "
        "or more.",
    )
    exercise.passed(f"random play wins {random_rate:.0%}, the policy {policy_rate:.0%}")
    return random_rate, policy_rate
