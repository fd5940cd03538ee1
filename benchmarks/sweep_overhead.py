"""What does the sweep harness cost per candidate, with the measuring taken out?

Sweeps a study of N tiny candidates with a minimal plan and, for each, subtracts the engine's
launch-to-ready time and the measurement time (both recorded in the manifest) from the wall
time of the candidate. What remains is papermill, kernel start, imports, preflight, the
environment fingerprint and the journal writes. Target: at most 2 s per candidate.
`--simulator` sweeps servebook's simulated engine instead of llama.cpp (no engine build needed).

    .venv/bin/python benchmarks/sweep_overhead.py [--candidates 4] [--simulator]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from servebook import Journal
from servebook.config import Study
from servebook.sweeps import sweep
from servebook.util.progress import Reporter

TARGET_S = 2.0


def overhead_study(candidates: int, simulator: bool = False) -> Study:
    """N candidates that differ in one knob, each measured as little as a run can be."""
    chunk_sizes = [64 * 2 ** i for i in range(candidates)]
    engine = {"engine": "vllm", "model": {"id": "org/model"}, "launch": {"simulator": True, "ready_timeout_s": 20}} \
        if simulator else {"model": {"path": "tiny:target"}}
    return Study.model_validate({
        "name": "overhead",
        "base": {**engine, "knobs": {"max_running_requests": 1, "context_length": 4096}},
        "include_base": False,
        "axes": {"grid": {"knobs.chunk_size": chunk_sizes}},
        "verdict": {"baseline": f"chunk_size={chunk_sizes[0]}"},
        "plan": {"decode": {"concurrency": [1], "categories": ["prose"], "output_tokens": 2, "rounds": 1},
                 "prefill": None, "warmup_requests": 0},
    })


def harness_overheads(study: Study) -> list[tuple[str, float, float, float]]:
    """Per candidate, in sweep order: its name, wall seconds, the engine's ready and measuring seconds, and the
    rest (the harness). The first candidate's harness includes starting the kernel."""
    with tempfile.TemporaryDirectory() as tmp:
        journal = Journal(Path(tmp) / "journal")
        results = sweep(study, journal, reporter=Reporter(quiet=True))
        rows = []
        for result in results:
            engine = journal.run(result.run_id).manifest.engine
            measured = (engine.ready_s or 0) + (engine.measure_s or 0)
            rows.append((result.name, result.seconds, measured, result.seconds - measured))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=4)
    parser.add_argument("--simulator", action="store_true", help="sweep the simulated engine, not llama.cpp")
    args = parser.parse_args()
    rows = harness_overheads(overhead_study(args.candidates, args.simulator))
    print(f"{'candidate':<18} {'wall s':>8} {'engine+measure s':>17} {'harness s':>10}")
    for name, wall, measured, overhead in rows:
        print(f"{name:<18} {wall:8.2f} {measured:17.2f} {overhead:10.2f}")
    overheads = [r[3] for r in rows]
    median = statistics.median(overheads)
    print(f"\nharness overhead per candidate: median {median:.2f} s, max {max(overheads):.2f} s "
          f"over {len(rows)} candidates (target <= {TARGET_S:g} s): {'met' if median <= TARGET_S else 'NOT met'}")


if __name__ == "__main__":
    main()
