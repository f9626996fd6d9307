"""The course with nbgrader: the student version made from the lessons and their reference answers, and a
round trip through nbgrader's own commands, grading the reference answers and a wrong one."""

from __future__ import annotations

import ast
import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import grading  # noqa: E402  # scripts/grading.py

pytest.importorskip("nbgrader", reason="the grading extra: pip install -e '.[grading]'")


def cells(path: Path) -> list[dict]:
    return [
        {**cell, "source": cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])}
        for cell in json.loads(path.read_text())["cells"]
    ]


@pytest.mark.parametrize("lesson", grading.lesson_numbers())
def test_every_lesson_becomes_a_source_assignment(lesson, tmp_path):
    (path,) = grading.write_source(tmp_path, [lesson])
    source = cells(path)
    answers = [c for c in source if c["metadata"].get("nbgrader", {}).get("solution")]
    checks = [c for c in source if c["metadata"].get("nbgrader", {}).get("grade")]
    lesson_cells = cells(grading.lesson_notebook(lesson))
    exercises = sum(c["source"].startswith("### Exercise") for c in lesson_cells)
    assert len(answers) == len(checks) == exercises
    assert all("### BEGIN SOLUTION" in c["source"] and "# your code here" not in c["source"] for c in answers)
    assert all(c["source"].lstrip().startswith("check.") or "check." in c["source"] for c in checks)
    assert not any(c["source"].startswith("if SOLUTIONS:") for c in source)
    assert [c["metadata"]["nbgrader"]["points"] for c in checks] == [1] * exercises
    for cell in answers:
        ast.parse(cell["source"])  # the answer sits in the lesson's def line as valid Python
    helpers = [
        c["source"] for c in source if c["source"].startswith("# What the exercises' answers may use.")
    ]
    used = {n.id for c in answers for n in ast.walk(ast.parse(c["source"])) if isinstance(n, ast.Name)}
    for name in {"VALUES", "np", "torch", "F", "chess"} & used:  # defined by the lesson or by the helpers
        assert any(f"{name} =" in h or f" {name}\n" in h + "\n" or f"as {name}" in h for h in helpers) or any(
            f"import {name}" in c["source"] or f"as {name}" in c["source"] or f"{name} =" in c["source"]
            for c in source
            if c["cell_type"] == "code" and c not in answers
        ), f"lesson {lesson}'s answers use {name}, which nothing defines"


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("OPENENV_LAB_SOLUTIONS", None)  # students' notebooks: no reference answers loaded
    env["OPENENV_LAB_SMOKE"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_nbgrader_round_trip_grades_the_reference_and_names_a_wrong_answer(tmp_path):
    course = tmp_path / "course"
    (source,) = grading.write_source(course, ["09"])
    made = nbgrader(course, "generate_assignment", "lesson_09", "--force")
    assert made.returncode == 0, made.stderr[-3000:]
    student = course / "release" / "lesson_09" / source.name
    released = [c for c in cells(student) if c["metadata"].get("nbgrader", {}).get("solution")]
    assert len(released) == 5
    for cell in released:  # the lesson's own header and placeholder; no answer left
        assert cell["source"].splitlines()[1:] == ["    # your code here", "    raise NotImplementedError"]
    assert "Q[s_next].max()" not in student.read_text()

    for who in ("reference", "wrong"):
        (course / "submitted" / who / "lesson_09").mkdir(parents=True)
    shutil.copy(source, course / "submitted" / "reference" / "lesson_09" / source.name)
    right = "target = reward if terminated else reward + gamma * Q[s_next].max()"
    assert right in source.read_text()
    wrong = source.read_text().replace(
        right, "target = reward + gamma * Q[s_next].max()"
    )  # bootstraps at the end
    (course / "submitted" / "wrong" / "lesson_09" / source.name).write_text(wrong)
    graded = nbgrader(course, "autograde", "lesson_09")
    assert graded.returncode == 0, graded.stderr[-3000:]

    report = course / "report.csv"
    assert grading.main(["report", "--course", str(course), "lesson_09", "--csv", str(report)]) == 0
    rows = list(csv.DictReader(report.open()))
    scores = {(row["student"], int(row["exercise"])): int(row["points"]) for row in rows}
    assert all(scores["reference", n] == 1 for n in range(1, 6))
    assert scores["wrong", 3] == 0 and scores["wrong", 1] == scores["wrong", 2] == 1
    (hint,) = [row["hint"] for row in rows if row["student"] == "wrong" and row["exercise"] == "3"]
    assert "When the step is `terminated` nothing follows" in hint

    exported = nbgrader(course, "export")
    assert exported.returncode == 0, exported.stderr[-3000:]
    totals = {
        row["student_id"]: float(row["score"]) for row in csv.DictReader((course / "grades.csv").open())
    }
    assert totals["reference"] == 5.0 and totals["wrong"] < 5.0
