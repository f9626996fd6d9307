"""Render the tables of docs/infos.md, docs/ids.md and docs/options.md from the code they describe.

Each table sits between ``<!-- infos:NAME -->`` (or ``ids:NAME``, ``options:NAME``) and
``<!-- /infos:NAME -->``, written by this script from the declarations the package runs on (the
adapters' `InfoKey`s, the registration's `id_table`, the servers' catalogue and ranges), so the docs
cannot say other than what an env does:

    python scripts/render_docs.py

``--check`` writes nothing and exits with status 1 when a document differs from what it would write
(the test suite runs it).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from openenv_lab.adapters.atari import ATARI_INFO_KEYS, CLIPPED_INFO_KEYS  # noqa: E402
from openenv_lab.adapters.base import COMMON_INFO_KEYS  # noqa: E402
from openenv_lab.adapters.chess import ChessAdapter  # noqa: E402
from openenv_lab.adapters.finrl import finrl_info_keys  # noqa: E402
from openenv_lab.adapters.generic import TOOL_INFO_KEYS  # noqa: E402
from openenv_lab.adapters.info_schema import markdown_table  # noqa: E402
from openenv_lab.envs.registration import (  # noqa: E402
    ATARI_57,
    ATARI_VARIANTS,
    RegisteredId,
    id_table,
)
from openenv_lab.envs.vector import RESTART_INFO_KEYS  # noqa: E402
from openenv_lab.preprocessing import RANGES as PREPROCESSING_RANGES  # noqa: E402
from openenv_lab.preprocessing import Preprocessing  # noqa: E402
from openenv_lab.servers import BUNDLED_SERVERS, SERVE_RANGES, ServeOptions  # noqa: E402

#: The default market's tickers (openenv_lab.market's synthetic data): FinRL's array's length here.
FINRL_TICKERS = 5


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return "\n".join([*lines, *("| " + " | ".join(row) + " |" for row in rows)])


def _ids(family: str) -> list[RegisteredId]:
    return [row for row in id_table() if row.family == family and row.kwargs]


def atari_ids() -> str:
    """One row per Atari-57 game: its ALE id and its four ids."""
    by_id = {row.env_id: row for row in _ids("atari")}
    patterns = list(ATARI_VARIANTS)
    rows = []
    for game in ATARI_57:
        ids = [f"openenv/{pattern.format(game=game)}" for pattern in patterns]
        rows.append([f"`{by_id[ids[0]].kwargs['game']}`", *(f"`{env_id}`" for env_id in ids)])
    return _table(["`game=`", *(f"`{pattern}`" for pattern in patterns)], rows)


def atari_variants() -> str:
    """What each of a game's ids sets (Pong's, as an example of every game's)."""
    by_id = {row.env_id: row for row in _ids("atari")}
    rows = []
    for pattern in ATARI_VARIANTS:
        row = by_id[f"openenv/{pattern.format(game='Pong')}"]
        rows.append([f"`{pattern}`", ", ".join(f"`{k}={v!r}`" for k, v in row.kwargs.items() if k != "game")])
    return _table(["id", "what it sets (beside `game`)"], rows)


def family_ids(family: str) -> str:
    return _table(
        ["id", "what it sets"], [[f"`{row.env_id}`", f"`{row.describe()}`"] for row in _ids(family)]
    )


def family_options(name: str) -> str:
    """A server's options: the ``serve`` flags (constructor arguments) and what a reset takes."""
    spec = BUNDLED_SERVERS[name]
    rows = []
    for option in (*spec.options, *spec.reset_only):
        where = ("`--" + option.name.replace("_", "-") + "`" if option.flag else "") + (
            (" and reset" if option.flag else "reset") if option.on_reset or not option.flag else ""
        )
        default = "" if option.default is None else f"`{option.default!r}`"
        rows.append([f"`{option.name}`", where, option.describe(), default, option.help])
    return _table(["option", "set by", "takes", "default", "what it is"], rows)


def preprocessing_options() -> str:
    """``reset(preprocessing={...})``'s settings on the Atari server."""
    defaults = Preprocessing()
    rows = []
    for name in ("noop_max", "frame_skip", "screen_size", "terminal_on_life_loss", "grayscale_obs"):
        takes = str(PREPROCESSING_RANGES[name]) if name in PREPROCESSING_RANGES else "true or false"
        if name == "screen_size":
            takes += ", or [width, height] of two"
        rows.append([f"`{name}`", takes, f"`{getattr(defaults, name)!r}`"])
    return _table(["setting", "takes", "default"], rows)


def serve_options() -> str:
    """The flags every server takes (`ServeOptions` and ``--max-sessions``)."""
    fields = {field.name: field for field in ServeOptions.flag_fields()}
    rows = []
    for name, allowed in SERVE_RANGES.items():
        field = fields.get(name)
        default = None if field is None else field.default
        unset = "the family's" if field is None else field.metadata["unset"]
        shown = unset if default is None else f"`{default!r}`"
        extra = " (0: never)" if field is not None and field.metadata["never"] else ""
        rows.append([f"`--{name.replace('_', '-')}`", f"{allowed}{extra}", shown])
    return _table(["flag", "takes", "default"], rows)


#: (document, block) -> the block's Markdown.
BLOCKS = {
    ("infos", "common"): lambda: markdown_table(COMMON_INFO_KEYS),
    ("infos", "chess"): lambda: markdown_table(ChessAdapter.info_keys),
    ("infos", "atari"): lambda: markdown_table(ATARI_INFO_KEYS),
    ("infos", "atari-clipped"): lambda: markdown_table(CLIPPED_INFO_KEYS),
    ("infos", "finrl"): lambda: markdown_table(finrl_info_keys(FINRL_TICKERS)),
    ("infos", "tools"): lambda: markdown_table(TOOL_INFO_KEYS),
    ("infos", "restart"): lambda: markdown_table(RESTART_INFO_KEYS),
    ("ids", "families"): lambda: _table(
        ["id", "family"], [[f"`{row.env_id}`", row.family] for row in id_table() if not row.kwargs]
    ),
    ("ids", "atari-variants"): atari_variants,
    ("ids", "atari"): atari_ids,
    ("ids", "chess"): lambda: family_ids("chess"),
    ("ids", "finrl"): lambda: family_ids("finrl"),
    **{("options", name): (lambda name=name: family_options(name)) for name in BUNDLED_SERVERS},
    ("options", "preprocessing"): preprocessing_options,
    ("options", "serve"): serve_options,
}
DOCUMENTS = {
    "infos": ROOT / "docs" / "infos.md",
    "ids": ROOT / "docs" / "ids.md",
    "options": ROOT / "docs" / "options.md",
}


def render(kind: str, text: str) -> str:
    """``text`` (the document of ``kind``) with every block of that kind rewritten; an unknown block is an
    error."""
    pattern = re.compile(
        rf"(<!-- {kind}:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /{kind}:(?P=name) -->)", re.S
    )

    def block(match: re.Match[str]) -> str:
        name = match.group("name")
        if (kind, name) not in BLOCKS:
            known = sorted(n for k, n in BLOCKS if k == kind)
            raise SystemExit(f"{DOCUMENTS[kind]}: no {kind} table named {name!r}; there are {known}")
        return f"{match.group(1)}{BLOCKS[kind, name]()}\n{match.group(4)}"

    missing = {n for k, n in BLOCKS if k == kind} - {m.group("name") for m in pattern.finditer(text)}
    if missing:
        raise SystemExit(f"{DOCUMENTS[kind]} has no block for {sorted(missing)}")
    return pattern.sub(block, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a doc differs")
    args = parser.parse_args(argv)
    stale = []
    for kind, document in DOCUMENTS.items():
        text = document.read_text()
        rendered = render(kind, text)
        if rendered == text:
            continue
        stale.append(document)
        if not args.check:
            temporary = document.with_suffix(".md.tmp")  # never a half-written document
            temporary.write_text(rendered)
            temporary.replace(document)
            print(f"wrote {document}")
    if stale and args.check:
        print(
            f"out of date: {', '.join(map(str, stale))}; run python scripts/render_docs.py", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
