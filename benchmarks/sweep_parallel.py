"""How much does `sweep --parallel auto` save? Simulated TP2 candidates on 4 fake GPUs against the same study
run serially; prints both wall times and their ratio.

The simulator never touches a GPU, so this measures the scheduling (disjoint GPU groups, two candidates at
once) and the harness around it; on a real host each engine's cold start is what parallelism hides.

    .venv/bin/python benchmarks/sweep_parallel.py [--candidates 4] [--gpus 4]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from servebook.config.loading import study_from_data
from servebook.journal import Journal
from servebook.sweeps import sweep
from servebook.util.progress import Reporter


def study(name: str, candidates: int) -> dict:
    return {
        "name": name,
        "base": {"engine": "vllm", "model": {"id": "org/model", "revision": "abc"},
                 "knobs": {"max_running_requests": 4, "tensor_parallel_size": 2},
                 "launch": {"simulator": True, "ready_timeout_s": 30}},
        "axes": {"grid": {"knobs.max_running_requests": [4 + i for i in range(1, candidates)]}},
        "plan": {"decode": {"concurrency": [1, 2], "categories": ["prose"], "output_tokens": 32, "rounds": 1,
                            "min_cell_s": 2},
                 "prefill": None, "warmup_requests": 1, "max_foreign_cpu_cores": 16},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=4)
    parser.add_argument("--gpus", type=int, default=4)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="servebook-parallel-bench-"))
    quiet = Reporter(quiet=True)
    timings = {}
    for mode, parallel in (("serial", 1), ("parallel", "auto")):
        loaded = study_from_data(study(f"bench-{mode}", args.candidates), "benchmark")
        t0 = time.perf_counter()
        results = sweep(loaded, Journal(root / mode), reporter=quiet, parallel=parallel,
                        gpus=list(range(args.gpus)))
        timings[mode] = time.perf_counter() - t0
        statuses = sorted({r.status for r in results})
        print(f"{mode}: {len(results)} candidates in {timings[mode]:.1f} s ({', '.join(statuses)})")
    print(f"ratio parallel/serial: {timings['parallel'] / timings['serial']:.2f} "
          f"({args.gpus} fake GPUs, TP2: {args.gpus // 2} candidates at once)")


if __name__ == "__main__":
    main()
