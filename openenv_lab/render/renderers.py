"""How each environment family draws one recorded step: HTML for the viewer's panes, from rows only.

A renderer turns an episode's rows (a polars table) and a step index into two HTML fragments: ``main``
(the board, the screen, the equity curve) and ``side`` (the move list, lives and score, holdings); with
``main=False`` it may skip the main pane (the static export draws FinRL's curve once, not per step). The live
widget and the static HTML export use the same fragments, so both show the same thing. Renderers never
talk to servers: everything comes from the recorded columns and the trajectory's metadata.

Add a family with `register_renderer`; `renderer_for` falls back to the generic one (the raw observation).
"""

from __future__ import annotations

import base64
import functools
import html
import io
import json
from collections.abc import Callable
from typing import Any

import polars as pl

__all__ = ["Panes", "register_renderer", "renderer_for", "step_table"]

Panes = dict[str, str]
Renderer = Callable[..., Panes]  # (episode rows, step index, metadata, *, main=True) -> panes

_RENDERERS: dict[str, Renderer] = {}


def register_renderer(family: str) -> Callable[[Renderer], Renderer]:
    """Decorator: use the function to draw steps of trajectories whose metadata says ``family``."""

    def decorate(function: Renderer) -> Renderer:
        _RENDERERS[family] = function
        return function

    return decorate


def renderer_for(family: str) -> Renderer:
    return _RENDERERS.get(family, _RENDERERS["generic"])


def step_table(episode: pl.DataFrame, index: int, around: int = 4) -> str:
    """A small table of the steps around ``index``, the current one highlighted."""
    start, stop = max(0, index - around), min(episode.height, index + around + 1)
    rows = []
    for position, row in enumerate(episode.slice(start, stop - start).iter_rows(named=True), start=start):
        ended = "terminated" if row["terminated"] else "truncated" if row["truncated"] else ""
        style = ' style="background:#ffe9a8;font-weight:600"' if position == index else ""
        label = row["action_label"] if row["action_label"] is not None else "reset"
        rows.append(
            f"<tr{style}><td>{row['step']}</td><td>{html.escape(str(label))}</td>"
            f"<td>{row['reward']:+.3g}</td><td>{row['return']:+.4g}</td><td>{ended}</td></tr>"
        )
    return (
        '<table style="border-collapse:collapse;font:12px monospace" cellpadding="3">'
        "<tr><th>step</th><th>action</th><th>reward</th><th>return</th><th></th></tr>"
        + "".join(rows)
        + "</table>"
    )


# ---------------------------------------------------------------------------- chess


@register_renderer("chess")
def chess_panes(episode: pl.DataFrame, index: int, metadata: dict[str, Any], *, main: bool = True) -> Panes:
    import chess
    import chess.svg

    row = episode.row(index, named=True)
    board = chess.Board(row["fen"])
    arrows = []
    if row.get("move") and row["move"] != "0000" and not row.get("illegal_move"):
        arrows.append(chess.svg.Arrow(*_squares(row["move"]), color="#2f6fdd88"))
    last = row.get("opponent_move") or (row.get("move") if not row.get("illegal_move") else None)
    lastmove = chess.Move.from_uci(last) if last and last != "0000" else None
    check = board.king(board.turn) if board.is_check() else None
    svg = chess.svg.board(
        board,
        orientation=row.get("agent_color", "white") != "black",
        lastmove=lastmove,
        arrows=arrows,
        check=check,
        size=320,
    )
    moves = _move_list(episode)
    listing = " ".join(
        f'<span style="background:#ffe9a8">{html.escape(text)}</span>' if i == index else html.escape(text)
        for i, text in enumerate(moves)
        if text
    )
    status = f"{row.get('agent_color', '')} to move" if not (row["terminated"] or row["truncated"]) else ""
    if row.get("end_reason"):
        status = f"{row.get('result') or ''} {row['end_reason'].replace('_', ' ')}"
    side = (
        f'<div style="font:13px sans-serif;max-width:300px"><b>{html.escape(status)}</b>'
        f'<p style="font:12px monospace;line-height:1.6">{listing}</p></div>'
    )
    return {"main": str(svg), "side": side}


def _squares(uci: str) -> tuple[int, int]:
    import chess

    move = chess.Move.from_uci(uci)
    return move.from_square, move.to_square


def _move_list(episode: pl.DataFrame) -> list[str]:
    """For each row, the moves it made in SAN (the agent's, then the opponent's reply)."""
    return _cached_move_list(
        tuple(episode["fen"].to_list()),
        tuple(episode["move"].to_list()),
        tuple(episode["opponent_move"].to_list()),
    )


@functools.lru_cache(maxsize=32)
def _cached_move_list(fens: tuple[Any, ...], moves: tuple[Any, ...], replies: tuple[Any, ...]) -> list[str]:
    import chess

    texts = []
    for i, (move, reply) in enumerate(zip(moves, replies, strict=True)):
        parts = []
        board = chess.Board(fens[i - 1]) if i > 0 else None
        for uci in (move, reply):
            if not uci or uci == "0000" or board is None:
                if uci and board is None:
                    parts.append(uci)  # the opponent's opening move at reset
                continue
            try:
                parsed = chess.Move.from_uci(uci)
                if board.is_legal(parsed):
                    parts.append(board.san(parsed))
                    board.push(parsed)
            except ValueError:
                parts.append(uci)
        texts.append(" ".join(parts))
    return texts


# ---------------------------------------------------------------------------- atari


@register_renderer("atari")
def atari_panes(episode: pl.DataFrame, index: int, metadata: dict[str, Any], *, main: bool = True) -> Panes:
    row = episode.row(index, named=True)
    png = row.get("screen_png")
    if png:
        encoded = base64.b64encode(png).decode("ascii")
        main = (
            f'<img src="data:image/png;base64,{encoded}" width="320" '
            'style="image-rendering:pixelated;image-rendering:crisp-edges" alt="Atari screen">'
        )
    else:
        main = "<p>(no screen recorded: RAM observations)</p>"
    action = row["action_label"] or "reset"
    side = (
        f'<div style="font:13px sans-serif"><b>{html.escape(str(metadata.get("game", "")))}</b><br>'
        f"score {row['return']:+.0f}<br>lives {row.get('lives', '?')}<br>frame {row.get('frame_number', '?')}"
        f"<br>action {html.escape(str(action))}</div>"
    )
    return {"main": main, "side": side}


# ---------------------------------------------------------------------------- finrl


@register_renderer("finrl")
def finrl_panes(episode: pl.DataFrame, index: int, metadata: dict[str, Any], *, main: bool = True) -> Panes:
    row = episode.row(index, named=True)
    curve = equity_curve_html(episode, cursor=index, metadata=metadata) if main else ""
    return {"main": curve, "side": _holdings_html(row, metadata)}


def buy_and_hold(episode: pl.DataFrame, initial_amount: float) -> list[float]:
    """Value of splitting the initial amount equally over the tickers on the first day, then holding."""
    closes = episode["close"].to_list()
    first = closes[0]
    shares = [initial_amount / len(first) / price for price in first]
    return [sum(s * p for s, p in zip(shares, day, strict=True)) for day in closes]


def equity_curve_html(episode: pl.DataFrame, *, cursor: int | None, metadata: dict[str, Any]) -> str:
    """The portfolio's value against buy-and-hold, with the cursor at the current step (a PNG)."""
    from matplotlib.figure import Figure

    values = episode["portfolio_value"].to_list()
    initial = float(metadata.get("initial_amount") or values[0])
    figure = Figure(figsize=(6, 3), dpi=80)
    axes = figure.subplots()
    axes.plot(values, label="agent", color="#2f6fdd")
    axes.plot(buy_and_hold(episode, initial), label="buy and hold (equal weights)", color="#999999")
    if cursor is not None:
        axes.axvline(cursor, color="#dd5f2f", linewidth=1)
    axes.set_xlabel("trading day of the episode")
    axes.set_ylabel("portfolio value")
    axes.legend(loc="upper left", fontsize=8)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    return figure_html(figure, alt="equity curve")


def figure_html(figure: Any, *, alt: str) -> str:
    """A matplotlib figure as an embedded PNG ``<img>``."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img src="data:image/png;base64,{encoded}" alt="{html.escape(alt)}">'


def _holdings_html(row: dict[str, Any], metadata: dict[str, Any]) -> str:
    tickers = metadata.get("tickers") or [f"stock {i}" for i in range(len(row["holdings"]))]
    values = [h * p for h, p in zip(row["holdings"], row["close"], strict=True)]
    largest = max([*values, 1.0])
    bars = "".join(
        f"<tr><td>{html.escape(t)}</td><td>{h}</td>"
        f'<td><div style="background:#2f6fdd;height:10px;width:{int(120 * v / largest)}px"></div></td></tr>'
        for t, h, v in zip(tickers, row["holdings"], values, strict=True)
    )
    return (
        f'<div style="font:12px sans-serif"><b>{html.escape(str(row["date"]))}</b><br>'
        f"value {row['portfolio_value']:,.0f}<br>cash {row['cash']:,.0f}"
        f'<table style="font:12px monospace">{bars}</table></div>'
    )


# ---------------------------------------------------------------------------- anything else


@register_renderer("generic")
def generic_panes(episode: pl.DataFrame, index: int, metadata: dict[str, Any], *, main: bool = True) -> Panes:
    row = episode.row(index, named=True)
    raw = row.get("observation_json")
    text = json.dumps(json.loads(raw), indent=2) if raw else "(no observation recorded)"
    return {
        "main": f'<pre style="max-height:320px;overflow:auto;font-size:12px">{html.escape(text)}</pre>',
        "side": "",
    }
