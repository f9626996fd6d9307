"""The course's lessons as nbgrader assignments, and a grade report exercise by exercise.

The lessons and their reference answers (``tutorials/solutions/``) stay the one source. From them this
script writes nbgrader's source assignment: each exercise's cell with the reference answer between
``### BEGIN SOLUTION`` and ``### END SOLUTION`` (under the lesson's own ``def`` or ``class`` line), each check
a graded cell worth one point, the cells that load the reference answers left out. nbgrader then makes the
student version (the answers replaced by ``# your code here``), runs the students' notebooks, and scores
each check that raises nothing; the report adds each failed check's hint.

    python scripts/grading.py source --course COURSE 09 10      # COURSE/source/lesson_09/..., the config
    cd COURSE && nbgrader generate_assignment lesson_09          # release/lesson_09/: the student version
    # the students' notebooks go to COURSE/submitted/STUDENT/lesson_09/
    cd COURSE && nbgrader autograde lesson_09                    # runs them (OPENENV_LAB_SMOKE=1: faster)
    python scripts/grading.py report --course COURSE lesson_09   # per exercise, with hints; --csv FILE

``nbgrader export`` gives the usual per-assignment CSV. nbgrader comes with the ``grading`` extra.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TUTORIALS = ROOT / "tutorials"
SOLUTIONS = TUTORIALS / "solutions"
COURSE_ID = "openenv-lab-course"
#: What nbgrader writes in place of an answer: the lessons' own placeholder.
STUB = "# your code here\nraise NotImplementedError"
CONFIG = f'''\
"""nbgrader's settings for the openenv_lab course (written by scripts/grading.py)."""

c = get_config()  # noqa: F821 - nbgrader's config loader defines it
c.CourseDirectory.course_id = "{COURSE_ID}"
c.ClearSolutions.code_stub = {{"python": {STUB!r}}}
c.Execute.timeout = 300  # a cell's seconds; a lesson's check stops itself after 60
'''


def lesson_notebook(number: str) -> Path:
    """The lesson's notebook, by its number (``"09"``)."""
    found = sorted(TUTORIALS.glob(f"{number}_*.ipynb"))
    if not found:
        raise SystemExit(f"no lesson {number} in {TUTORIALS} (the lessons: {lesson_numbers()})")
    return found[0]


def lesson_numbers() -> list[str]:
    return [path.name[:2] for path in sorted(TUTORIALS.glob("[0-9][0-9]_*.ipynb"))]


def _source(cell: dict[str, Any]) -> str:
    text = cell["source"]
    return text if isinstance(text, str) else "".join(text)


def _metadata(grade_id: str, *, grade: bool, solution: bool, points: int = 0) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": grade,  # the checks are read-only in the student version
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if grade:
        meta["points"] = points
    return meta


class Answers:
    """The reference answers of one lesson: each top-level function's and class's body, each value, and
    every top-level statement (imports, constants, helpers) for what the answers use."""

    def __init__(self, path: Path) -> None:
        self.text = path.read_text()
        lines = self.text.splitlines()
        self.bodies: dict[str, str] = {}
        self.values: dict[str, str] = {}
        #: every top-level statement but the docstring and ``__future__``: (the names it binds, its source)
        self.statements: list[tuple[set[str], str]] = []
        for node in ast.parse(self.text).body:
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # the module's docstring
            segment = ast.get_source_segment(self.text, node) or ""
            self.statements.append((_bound(node), segment))
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                first = node.body[0].lineno - 1
                self.bodies[node.name] = textwrap.dedent("\n".join(lines[first : node.end_lineno]))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):  # an exercise's answer can be a value
                for name in _bound(node):
                    self.values[name] = segment

    def helpers(self, answers: set[str]) -> str:
        """What the answers use beyond themselves: the module's imports, constants and helpers."""
        return "\n\n".join(text for bound, text in self.statements if not bound & answers)

    def cell(self, student: str, lesson: str) -> str:
        """The exercise's cell with the answer in place of the placeholder, under the lesson's own header
        (a ``def`` or ``class`` line); a value's answer (``NAME = ...  # your code here``) replaces its
        line."""
        header = []
        for line in student.splitlines():
            if line.strip().startswith("# your code here"):
                break
            if "# your code here" in line and "=" in line:
                name = line.split("=")[0].split(":")[0].strip()
                if name not in self.values:
                    raise SystemExit(
                        f"lesson {lesson}: tutorials/solutions/lesson_{lesson}.py has no {name} = ..."
                    )
                return "\n".join([*header, "### BEGIN SOLUTION", self.values[name], "### END SOLUTION"])
            header.append(line)
        match = next((line for line in header if line.startswith(("def ", "class "))), None)
        if match is None:
            raise SystemExit(f"lesson {lesson}: an exercise cell without a def or class line:\n{student}")
        name = match.split()[1].split("(")[0].rstrip(":")
        if name not in self.bodies:
            raise SystemExit(f"lesson {lesson}: tutorials/solutions/lesson_{lesson}.py has no {name}")
        body = textwrap.indent(self.bodies[name], "    ")
        return "\n".join([*header, "    ### BEGIN SOLUTION", body, "    ### END SOLUTION"])


def source_notebook(lesson: str) -> dict[str, Any]:
    """nbgrader's source version of a lesson (see the module docstring)."""
    path = lesson_notebook(lesson)
    nb = json.loads(path.read_text())
    answers = Answers(SOLUTIONS / f"lesson_{lesson}.py")
    cells, exercise, pending = [], 0, 0
    for cell in nb["cells"]:
        text = _source(cell)
        if cell["cell_type"] == "markdown" and text.startswith("### Exercise"):
            exercise, pending = exercise + 1, 3
        elif cell["cell_type"] == "code" and pending:
            step, pending = 4 - pending, pending - 1
            if step == 1:  # the student's cell
                cell = {**cell, "source": answers.cell(text, lesson)}
                cell["metadata"] = {
                    **cell["metadata"],
                    "nbgrader": _metadata(f"answer_{exercise}", grade=False, solution=True),
                }
            elif step == 2:  # the cell loading the reference answer: nbgrader's source has it inline
                continue
            else:  # the check: one point when it raises nothing
                cell = {
                    **cell,
                    "metadata": {
                        **cell["metadata"],
                        "nbgrader": _metadata(f"check_{exercise}", grade=True, solution=False, points=1),
                    },
                }
        cells.append(cell)
    if not exercise:
        raise SystemExit(f"lesson {lesson} has no exercise")
    helpers = answers.helpers({name for cell in cells if _is_answer(cell) for name in _bound_by(cell)})
    if helpers:  # what the answers use, before the first exercise
        first = next(i for i, cell in enumerate(cells) if _is_answer(cell))
        heading = next(i for i in range(first, -1, -1) if cells[i]["cell_type"] == "markdown")
        cells.insert(
            heading,
            {
                "cell_type": "code",
                "execution_count": None,
                "id": f"helpers-{lesson}",
                "metadata": {},
                "outputs": [],
                "source": "# What the exercises' answers may use.\n" + helpers,
            },
        )
    return {**nb, "cells": cells}


def _is_answer(cell: dict[str, Any]) -> bool:
    return bool(cell.get("metadata", {}).get("nbgrader", {}).get("solution"))


def _bound(node: ast.stmt) -> set[str]:
    """The names a top-level statement binds."""
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _bound_by(cell: dict[str, Any]) -> set[str]:
    return {name for node in ast.parse(_source(cell)).body for name in _bound(node)}


def write_source(course: Path, lessons: list[str]) -> list[Path]:
    """Write each lesson's source assignment, ``COURSE/source/lesson_NN/``, and the course's config."""
    course.mkdir(parents=True, exist_ok=True)
    (course / "nbgrader_config.py").write_text(CONFIG)
    written = []
    for lesson in lessons:
        target = course / "source" / f"lesson_{lesson}" / lesson_notebook(lesson).name
        target.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(source_notebook(lesson), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        target.write_text(text)
        written.append(target)
    return written


def report(course: Path, assignment: str) -> list[dict[str, Any]]:
    """Each student's result for each check of ``assignment``: points, and the hint of a failed check."""
    rows = []
    for notebook in sorted((course / "autograded").glob(f"*/{assignment}/*.ipynb")):
        student = notebook.parent.parent.name
        for cell in json.loads(notebook.read_text())["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if not meta.get("grade"):
                continue
            errors = [out for out in cell.get("outputs", []) if out.get("output_type") == "error"]
            hint = f"{errors[0]['ename']}: {errors[0]['evalue']}" if errors else ""
            rows.append(
                {
                    "student": student,
                    "assignment": assignment,
                    "exercise": int(meta["grade_id"].rsplit("_", 1)[1]),
                    "points": 0 if errors else meta.get("points", 0),
                    "max_points": meta.get("points", 0),
                    "hint": hint,
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    source = commands.add_parser("source", help="write nbgrader's source assignments and the course's config")
    source.add_argument("--course", type=Path, required=True, help="the nbgrader course folder")
    source.add_argument(
        "lessons", nargs="*", help=f"lesson numbers (default: all, {' '.join(lesson_numbers())})"
    )
    grades = commands.add_parser("report", help="the autograded results, exercise by exercise")
    grades.add_argument("--course", type=Path, required=True)
    grades.add_argument("assignment", help="e.g. lesson_09")
    grades.add_argument("--csv", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    if args.command == "source":
        for path in write_source(args.course, [n.zfill(2) for n in args.lessons] or lesson_numbers()):
            print(f"wrote {path}")
        return 0
    rows = report(args.course, args.assignment)
    if not rows:
        print(f"nothing autograded for {args.assignment} in {args.course / 'autograded'}", file=sys.stderr)
        return 1
    for row in rows:
        hint = row["hint"].split(" is not right yet: ", 1)[-1]  # the check's own words, past its heading
        verdict = "ok" if row["points"] == row["max_points"] else hint.splitlines()[0][:300]
        print(
            f"{row['student']:12} exercise {row['exercise']}: {row['points']}/{row['max_points']}  {verdict}"
        )
    if args.csv:
        with args.csv.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
