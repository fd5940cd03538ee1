"""Where does launch-to-launch noise come from on this host? Interleaved launches of one configuration, varied
only in how the engine shares the CPU with the measuring client; prints each variant's between-launch CV.

On a 2-core machine llama-server's compute threads (2 by default, busy-polling between batches) share the cores
with the client that streams its responses, so a launch whose threads land badly can run slow in every cell.

    .venv/bin/python benchmarks/launch_noise.py [--rounds 6] [--variant 'no mmap=--no-mmap' ...]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile

from servebook.config import Candidate, Plan
from servebook.journal import Journal
from servebook.run import run_candidate
from servebook.util.progress import Reporter

PLAN = Plan.model_validate({"decode": {"concurrency": [1, 4], "categories": ["prose"], "output_tokens": 64,
                                       "rounds": 2, "min_cell_s": 2}, "prefill": None, "warmup_requests": 2})
BASE = {"model": {"path": "tiny:target"}, "knobs": {"chunk_size": 512, "max_running_requests": 4,
                                                    "context_length": 16384}}
VARIANTS = {
    "default (2 threads, polling)": [],
    "1 compute thread": ["-t", "1", "-tb", "1"],
    "no polling (--poll 0)": ["--poll", "0"],
}
CELLS = ("decode-prose-c1", "decode-prose-c4")


def cv(values: list[float]) -> float:
    logs = [math.log(v) for v in values]
    return 100 * statistics.stdev(logs) if len(logs) > 1 else float("nan")


def _steal() -> float:
    """Seconds of CPU stolen by the hypervisor so far (all CPUs), from /proc/stat."""
    try:
        fields = open("/proc/stat").readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS",
                        help="replace the variants: a name and llama-server arguments, e.g. 'no mmap=--no-mmap'")
    args = parser.parse_args()
    variants = {v.split("=", 1)[0]: v.split("=", 1)[1].split() for v in args.variant} if args.variant else VARIANTS
    figures: dict[str, dict[str, list[float]]] = {name: {cell: [] for cell in CELLS} for name in variants}
    steal_before = _steal()
    with tempfile.TemporaryDirectory() as tmp:
        journal = Journal(tmp)
        for round_ in range(args.rounds):
            for name, extra in variants.items():  # interleaved, so drift hits every variant alike
                candidate = Candidate.model_validate({"name": name, **BASE, "extra_args": extra})
                record = run_candidate(candidate, PLAN, journal, reporter=Reporter(quiet=True))
                cells = record.table("cells")
                if record.status != "completed" or cells is None:
                    print(f"  {name}: {record.status}")
                    continue
                rows = cells.set_index("cell_id")
                for cell in CELLS:
                    if bool(rows.at[cell, "valid"]):
                        figures[name][cell].append(float(rows.at[cell, "aggregate_tok_s"]))
                    else:
                        print(f"  {name} {cell}: left out ({rows.at[cell, 'invalid_reasons']})")
            print(f"  round {round_ + 1} of {args.rounds}", flush=True)
    print(f"\nCPU time the hypervisor took from this VM during the study (steal): {_steal() - steal_before:.1f} s")
    print(f"\n{'variant':32} " + " ".join(f"{c[-2:] + ' mean':>10} {c[-2:] + ' CV':>8}" for c in CELLS))
    for name, per_cell in figures.items():
        parts = []
        for cell in CELLS:
            values = per_cell[cell]
            mean = math.exp(statistics.fmean(math.log(v) for v in values)) if values else float("nan")
            parts.append(f"{mean:>10.0f} {cv(values):>7.1f}%")
        print(f"{name:32} " + " ".join(parts) + f"   ({len(per_cell[CELLS[0]])} launches)")
        for cell in CELLS:  # in launch order: a slow launch shows as one low figure in every cell
            print(f"{'':32} {cell}: " + " ".join(f"{v:.0f}" for v in per_cell[cell]))


if __name__ == "__main__":
    main()
