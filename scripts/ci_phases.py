"""Where a `.ci/run` went: its phases' wall times, as a table and as JSON.

`.ci/run` appends one line per phase to ``test-artifacts/ci-phases.tsv`` (name, start and end in Unix
seconds, exit status, and the machine's CPU clock ticks over it, busy and in all) and calls this script
when it ends, however it ends. Phases that ran side by side (the venvs, the Colab tier, the Docker engine)
overlap in the table; "before the tests" is the span from the run's start to the README's test command,
"whole run" the span to the end. "cpu busy" is how busy the whole machine was during a phase (all its
CPUs, whatever ran): where it is near 100%, the phase's time is CPU work, which no reordering shortens.

    python scripts/ci_phases.py test-artifacts/ci-phases.tsv --started 1764975600 --cpu-started "9 20" \
        --json ci-phases.json
    python scripts/ci_phases.py --fast-tier benchmarks/results/ci.json   # time the README's fast tier too

The JSON of a clean-clone run, copied to ``benchmarks/results/ci.json`` with the fast tier's time added, is
what the README's figures for the install, the test suite and the fast tier are rendered from
(scripts/render_benchmarks.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

#: The phase that runs the README's test command; everything before it is the install.
TESTS = "README's test command (pytest)"
ROOT = Path(__file__).resolve().parent.parent
#: The README's fast tier: the bash block after this comment.
FAST_TIER = re.compile(r"<!-- fast-tier[^>]*-->\n```bash\n(.*?)\n```", re.S)


@dataclass
class Phase:
    name: str
    start: float
    end: float
    status: int
    #: The share of the machine's CPU time that was busy during the phase (None: not measured).
    cpu_busy: float | None = None

    @property
    def seconds(self) -> float:
        return self.end - self.start


def read(path: Path) -> list[Phase]:
    """The phases recorded in ``path``, in the order they started (a torn last line is left out)."""
    phases = []
    for line in path.read_text().splitlines():
        fields = line.split("\t")
        if len(fields) not in (4, 6) or not all(field.lstrip("-").isdigit() for field in fields[1:4]):
            continue
        busy = share(*fields[4:6]) if len(fields) == 6 else None
        phases.append(Phase(fields[0], float(fields[1]), float(fields[2]), int(fields[3]), busy))
    return sorted(phases, key=lambda phase: phase.start)


def share(busy: str, total: str) -> float | None:
    """``busy`` ticks over ``total`` ticks, or None where they were not measured (``-``) or no time passed."""
    if not (busy.isdigit() and total.isdigit()) or int(total) == 0:
        return None
    return int(busy) / int(total)


def cpu_ticks() -> tuple[int, int] | None:
    """The machine's CPU time so far, busy and in all (clock ticks, as .ci/run's ``cpu_ticks``)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(value) for value in fields[1:10]]
    busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7]
    return busy, busy + ticks[3] + ticks[4]


def percent(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.0f}%"


def minutes(seconds: float) -> str:
    """``seconds`` as m:ss."""
    whole = round(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


def summary(phases: list[Phase], started: float, ended: float) -> dict[str, float | None]:
    """The run's spans: the whole run, the part before the tests, and the tests (None if not reached)."""
    tests = next((phase for phase in phases if phase.name == TESTS), None)
    return {
        "whole_run_s": ended - started,
        "before_tests_s": (tests.start if tests else ended) - started,
        "tests_s": tests.seconds if tests else None,
    }


def table(phases: list[Phase], started: float, ended: float, cpu_busy: float | None = None) -> str:
    """The phases as a text table: when each began (from the run's start), how long it took, its status,
    how busy the machine's CPUs were meanwhile; ``cpu_busy`` is the whole run's."""
    width = max([len(phase.name) for phase in phases] + [len("before the tests")])
    lines = [
        f"{'phase':{width}}  from   took   status  cpu busy",
        f"{'-' * width}  -----  -----  ------  --------",
    ]
    for phase in phases:
        status = "ok" if phase.status == 0 else f"exit {phase.status}"
        began, took = minutes(phase.start - started), minutes(phase.seconds)
        lines.append(
            f"{phase.name:{width}}  {began:>5}  {took:>5}  {status:6}  {percent(phase.cpu_busy):>8}".rstrip()
        )
    spans = summary(phases, started, ended)
    lines.append(f"{'before the tests':{width}}  {'0:00':>5}  {minutes(spans['before_tests_s']):>5}")
    whole = f"{'whole run':{width}}  {'0:00':>5}  {minutes(spans['whole_run_s']):>5}"
    lines.append(f"{whole}  {'':6}  {percent(cpu_busy):>8}".rstrip())
    return "\n".join(lines)


def commit() -> str | None:
    command = ["git", "rev-parse", "--short", "HEAD"]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=30)
    return done.stdout.strip() or None


def time_fast_tier(path: Path) -> int:
    """Runs the README's fast tier from the checkout and adds its wall time to the JSON at ``path``."""
    match = FAST_TIER.search((ROOT / "README.md").read_text())
    if match is None:
        print("ci_phases: README.md has no <!-- fast-tier --> block", file=sys.stderr)
        return 1
    started = time.monotonic()
    done = subprocess.run(["bash", "-c", match.group(1)], cwd=ROOT, check=False, timeout=1800)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        print(f"ci_phases: the fast tier failed (exit {done.returncode}); nothing written", file=sys.stderr)
        return 1
    data = json.loads(path.read_text())
    data.update(fast_tier_s=seconds, fast_tier_commit=commit())
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(data, indent=1) + "\n")
    partial.replace(path)
    print(f"The fast tier took {minutes(seconds)}; written to {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tsv", type=Path, nargs="?", help="the phases .ci/run recorded")
    parser.add_argument(
        "--fast-tier", type=Path, metavar="JSON", help="time the README's fast tier and add it to JSON"
    )
    parser.add_argument(
        "--started", type=float, help="when the run began (Unix seconds; default: the first phase's start)"
    )
    parser.add_argument(
        "--cpu-started", metavar="'BUSY TOTAL'", help="the machine's CPU ticks when the run began (.ci/run's)"
    )
    parser.add_argument("--json", type=Path, help="also write the phases and spans here")
    args = parser.parse_args(argv)
    if args.fast_tier is not None:
        return time_fast_tier(args.fast_tier)
    if args.tsv is None:
        parser.error("name the phases' TSV file, or --fast-tier JSON")
    phases = read(args.tsv) if args.tsv.is_file() else []
    if not phases:
        print(f"ci_phases: no phases recorded in {args.tsv}", file=sys.stderr)
        return 1
    started = args.started if args.started is not None else phases[0].start
    ended = max(time.time(), *(phase.end for phase in phases))
    cpu_busy = None
    now = cpu_ticks()
    if args.cpu_started and now is not None and len(args.cpu_started.split()) == 2:
        busy, total = args.cpu_started.split()
        if busy.isdigit() and total.isdigit():
            cpu_busy = share(str(now[0] - int(busy)), str(now[1] - int(total)))
    print("\nWhere this run's time went (phases side by side overlap; cpu busy: of the whole machine):")
    print(table(phases, started, ended, cpu_busy))
    if args.json:
        data = {
            "when": time.strftime("%Y-%m-%d", time.gmtime(started)),
            "commit": commit(),
            "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            **summary(phases, started, ended),
            "cpu_busy": cpu_busy,
            "phases": [
                {**asdict(phase), "seconds": phase.seconds, "from_s": phase.start - started}
                for phase in phases
            ],
        }
        partial = args.json.with_name(f".{args.json.name}.partial")
        partial.write_text(json.dumps(data, indent=1) + "\n")
        partial.replace(args.json)  # never a half-written report
    return 0


if __name__ == "__main__":
    sys.exit(main())
