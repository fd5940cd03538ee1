"""How much open-loop load can servebook's client offer on its own? The client's ceiling, against the simulator at
zero latency (every engine time multiplied by 0, so what is left is the client, HTTP and the simulator's server).

One run of open-loop cells at rising rates, short outputs. Per rate: what was achieved, how late requests left
their schedule (p99), and time to first token against the lowest rate's (the TTFT the client and HTTP add as load
grows). The ceiling is the highest rate whose requests all left within the plan's lag limit and whose median TTFT
rose by less than 1 ms, with the CPU the client process used. Beyond it, a load needs more client processes, or a
cell is invalid with `client_lag` (the check that makes a too-slow client visible instead of a slow engine).

    .venv/bin/python benchmarks/client_ceiling.py [--rates 25,50,100,200] [--duration 5] [--processes 1]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from servebook.config import Candidate, Plan  # noqa: E402
from servebook.journal import Journal  # noqa: E402
from servebook.run import run_candidate  # noqa: E402
from servebook.util.progress import Reporter  # noqa: E402


def offered_load(rates: list[float], duration: float, output_tokens: int = 16,
                 processes: int = 1) -> tuple[list[dict], Plan, float, float]:
    """One run of open-loop cells at `rates` against the simulator at zero latency: its cells, its plan, and the CPU
    seconds this process used in how many seconds of wall time."""
    candidate = Candidate.model_validate({
        "engine": "vllm", "model": {"id": "org/model"}, "knobs": {"max_running_requests": 4096},
        "extra_args": ["--sim-slowdown", "0"], "launch": {"simulator": True, "ready_timeout_s": 20}})
    plan = Plan.model_validate({
        "decode": None, "prefill": None, "warmup_requests": 1, "max_foreign_cpu_cores": 64,
        "load": {"rates_rps": rates, "warmup_s": 1, "duration_s": duration, "prompt_tokens": 64,
                 "output_tokens": output_tokens, "client_processes": processes}})
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        record = run_candidate(candidate, plan, Journal(folder), reporter=Reporter(quiet=True))
        if record.status != "completed":
            raise SystemExit(f"the run failed: {record.manifest.failure}")
        cells = record.table("cells").to_dict("records")
    wall = time.perf_counter() - started
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    return cells, plan, (cpu.ru_utime - cpu_before.ru_utime) + (cpu.ru_stime - cpu_before.ru_stime), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="25,50,100,200")
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--processes", type=int, default=1,
                        help="client processes sending the load (plan.load.client_processes)")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    cells, plan, used, wall = offered_load(rates, args.duration, args.output_tokens, args.processes)
    base_ttft = cells[0]["ttft_p50_s"] or 0.0
    print(f"client ceiling against the simulator at zero latency ({args.output_tokens} output tokens a request, "
          f"{args.duration:g} s windows, lag limit {plan.load.max_lag_ms:g} ms)")
    print(f"{'offered/s':>10} {'achieved/s':>11} {'send lag p99 ms':>16} {'TTFT p50 ms':>12} {'added ms':>9}  valid")
    ceiling = None
    for cell in cells:
        added = 1000 * ((cell["ttft_p50_s"] or 0.0) - base_ttft)
        ok = bool(cell["valid"]) and (cell["send_lag_p99_ms"] or 0) <= plan.load.max_lag_ms and added < 1.0
        ceiling = cell["offered_rps"] if ok else ceiling
        print(f"{cell['offered_rps']:>10g} {cell['achieved_rps']:>11.1f} {cell['send_lag_p99_ms'] or 0:>16.1f} "
              f"{1000 * (cell['ttft_p50_s'] or 0):>12.1f} {added:>9.2f}  {cell['invalid_codes'] or 'yes'}")
    where = "one client process" if args.processes == 1 else f"{args.processes} client processes"
    print(f"ceiling: {ceiling:g} requests/s in {where}" if ceiling else "ceiling: below the lowest rate")
    print(f"the run's own process used {used:.1f} s of CPU in {wall:.1f} s (the simulator runs in its own process"
          + (", the senders in theirs)" if args.processes > 1 else ")"))


if __name__ == "__main__":
    main()
