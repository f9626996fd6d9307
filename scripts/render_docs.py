"""Render the info tables of docs/infos.md from the adapters' own declarations (`InfoKey`).

Each table sits between ``<!-- infos:NAME -->`` and ``<!-- /infos:NAME -->``, written by this script
from the code that makes the infos, so the docs cannot say other than what an env returns:

    python scripts/render_infos.py

``--check`` writes nothing and exits with status 1 when the document differs from what it would write
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
from openenv_lab.envs.vector import RESTART_INFO_KEYS  # noqa: E402

DOCUMENT = ROOT / "docs" / "infos.md"
#: The default market's tickers (openenv_lab.market's synthetic data): FinRL's array's length here.
FINRL_TICKERS = 5
TABLES = {
    "common": COMMON_INFO_KEYS,
    "chess": ChessAdapter.info_keys,
    "atari": ATARI_INFO_KEYS,
    "atari-clipped": CLIPPED_INFO_KEYS,
    "finrl": finrl_info_keys(FINRL_TICKERS),
    "tools": TOOL_INFO_KEYS,
    "restart": RESTART_INFO_KEYS,
}
BLOCK = re.compile(r"(<!-- infos:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /infos:(?P=name) -->)", re.S)


def render(text: str) -> str:
    """``text`` with every infos block rewritten; an unknown block name is an error."""

    def table(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in TABLES:
            raise SystemExit(f"{DOCUMENT}: no info table named {name!r}; there are {sorted(TABLES)}")
        return f"{match.group(1)}{markdown_table(TABLES[name])}\n{match.group(4)}"

    return BLOCK.sub(table, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the doc differs")
    args = parser.parse_args(argv)
    text = DOCUMENT.read_text()
    rendered = render(text)
    missing = set(TABLES) - {m.group("name") for m in BLOCK.finditer(text)}
    if missing:
        print(f"{DOCUMENT} has no block for {sorted(missing)}", file=sys.stderr)
        return 1
    if rendered == text:
        return 0
    if args.check:
        print(f"{DOCUMENT} is out of date: run python scripts/render_infos.py", file=sys.stderr)
        return 1
    temporary = DOCUMENT.with_suffix(".md.tmp")  # never a half-written document
    temporary.write_text(rendered)
    temporary.replace(DOCUMENT)
    print(f"wrote {DOCUMENT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
