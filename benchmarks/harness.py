"""The whole performance picture of this machine in one command, as tables and as JSON.

Runs, one after the other in this process: `step_latency` (one chess env: ours vs raw websockets vs the
official client, and gym.make times), `vector_throughput` (echo, chess and Atari for N in 1, 4, 16, 64:
our vector env vs gymnasium's Sync/AsyncVectorEnv, with client and server CPU per step) and
`env_throughput` (Atari and FinRL through the wrapper vs in process), `atari_preprocessing` (Atari with
DeepMind preprocessing on the server vs gymnasium's wrappers in process), `fleet` (a vector env over N
server processes vs one multi-session server, and start-to-first-step times) and `ceilings` (each speed
target beside the ceiling measured in the same run, the transport against a raw websockets server, and
where the server's CPU per step goes). Keep the JSON of each commit to compare them.

    python benchmarks/harness.py --json results/$(git rev-parse --short HEAD).json
    python benchmarks/harness.py --quick                # seconds, for smoke tests
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import atari_preprocessing
import ceilings
import env_throughput
import fleet
import step_latency
import vector_throughput
from stamp import commit


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny numbers, for smoke tests")
    parser.add_argument("--json", default=None, help="write every result to this JSON file")
    args = parser.parse_args(argv)
    quick = ["--quick"] if args.quick else []
    sections = {}
    for name, module in (
        ("step_latency", step_latency),
        ("vector_throughput", vector_throughput),
        ("env_throughput", env_throughput),
        ("atari_preprocessing", atari_preprocessing),
        ("fleet", fleet),
        ("ceilings", ceilings),
    ):
        print(f"\n===== {name} =====")
        sections[name] = module.main(quick)
    report = {
        "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit(),
        "cpus": os.cpu_count(),
        **sections,
    }
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2))
        print(f"\nResults written to {path}")
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
