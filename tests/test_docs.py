"""Figures in the docs come from the benchmarks' JSON, never from a hand: the rendered tables match the
JSON, and no measured timing or ratio is typed anywhere else (README, ARCHITECTURE.md, docs/, the package)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

#: A measured figure: a time per step, a rate, or a ratio ("105 µs", "3,780 steps/s", "1.3-1.5x").
FIGURE = re.compile(
    r"(?<![\w.])~?\d[\d,]*(?:\.\d+)?(?:\s?[–-]\s?\d[\d,]*(?:\.\d+)?)?\s?(?:µs|us|ms|steps/s)(?![\w/])"
    r"|(?<![\w.])\d+(?:\.\d+)?(?:[–-]\d+(?:\.\d+)?)?x(?![\w])"
)


def typed_figures(text: str) -> list[str]:
    text = re.sub(r"<!-- benchmark:([\w-]+) -->.*?<!-- /benchmark:\1 -->", "", text, flags=re.S)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return [
        f"{match.group(0)!r} in: {line.strip()[:100]}"
        for line in text.splitlines()
        for match in FIGURE.finditer(line)
    ]


@pytest.mark.parametrize(
    "script",
    [
        "render_benchmarks.py",  # the benchmark tables, from the benchmarks' JSON
        "render_docs.py",  # the info and id tables, from the code they describe
    ],
)
def test_the_rendered_tables_are_up_to_date(script):
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / script), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_docs_type_no_measured_figures_outside_the_rendered_tables():
    for path in [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        assert typed_figures(path.read_text()) == [], path.name


def test_the_package_types_no_measured_figures_in_its_docstrings_and_comments():
    found = {}
    for path in sorted((ROOT / "openenv_lab").rglob("*.py")):
        figures = typed_figures(path.read_text())
        if figures:
            found[str(path.relative_to(ROOT))] = figures
    assert found == {}


def test_the_figure_pattern_catches_what_the_docs_used_to_type():
    for typed in ("~105 µs", "3,780 steps/s", "1.3-1.5x faster", "0.42–0.47x", "takes 4 ms"):
        assert typed_figures(typed), typed
    for fine in ("Discrete(4672)", "8x8x73 moves", "0xFF", "a 84x84 screen", "python3.11"):
        assert not typed_figures(fine), fine
