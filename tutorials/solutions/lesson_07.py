"""Lesson 7: tasks, tools and other people's environments."""

from __future__ import annotations

import json

import chess
from gymnasium import spaces

from openenv_lab.adapters import Spec


def mate_in_one(fen: str) -> str | None:
    board = chess.Board(fen)
    for move in board.legal_moves:
        board.push(move)
        mated = board.is_checkmate()
        board.pop()
        if mated:
            return move.uci()
    return None


def mate_in_two(fen: str) -> str | None:
    board = chess.Board(fen)
    for move in board.legal_moves:
        board.push(move)
        if board.is_checkmate():
            board.pop()
            return move.uci()
        replies = list(board.legal_moves)
        forced = bool(replies)  # no reply and no mate: stalemate, not a win
        for reply in replies:
            board.push(reply)
            escapes = mate_in_one(board.fen()) is None
            board.pop()
            if escapes:
                forced = False
                break
        board.pop()
        if forced:
            return move.uci()
    return None


def total_length(env, words: list[str]) -> int:
    total = 0
    for word in words:
        _, _, _, _, info = env.step(env.unwrapped.tool_action("echo_with_length", message=word))
        total += json.loads(info["tool_result"])["length"]  # the tool's value, as JSON text
    return total


NIM = Spec(
    "nim",
    action="take",
    actions=[1, 2, 3],
    legal_actions="allowed",
    observation={"pile": spaces.Discrete(21)},
)


def nim_policy(obs) -> int:
    take = obs["pile"] % 4 or 1  # leave the opponent a multiple of 4
    return [1, 2, 3].index(take) if obs["action_mask"][take - 1] else int(obs["action_mask"].argmax())
