"""Can servebook's client hold hundreds of concurrent agent sessions on its own? One agents cell against the
simulator (its GPU-engine timing model: a decode step of 4 ms plus 1.5 ms per running request, prefill at 20,000
tokens/s; `--slowdown 0` answers at once, which measures the simulator's own event loop as much as the client), all
sessions arriving at 32 a second (open loop, so all of them are open 8 s in) and then thinking, calling tools and
resending their growing histories until they end.

Printed: how many sessions were in flight at once (each from its first send to its last token), the turns sent and
their rate, how late turns left after they were due (p50, p99: the agents cell's client_lag check holds p99 under the
plan's max_lag_ms), and the CPU the client's process used and the processes it started (the simulator). The aim
is 256 sessions with a p99 send lag under 20 ms on a 2-core machine. Measured on one, defaults, beside other work
(load average 0.7 to 2): p50 0.8 to 1.0 ms, p99 4.9, 5.3, 6.2, 9.2, 14.0, 13.9 ms over six runs (the higher ones with
the host busier), the client's process 17 to 19 s of CPU in 98 s, the simulator 24 to 28 s. Through httpx
(before measure.transport.sse) the same runs gave p50 1.3 to 2.2 ms, p99 42, 51, 53 and 111 ms, the client 32 to 39 s of CPU.

    .venv/bin/python benchmarks/agent_sessions.py [--sessions 256] [--turns 6] [--think 2] [--output-tokens 32]
                                                  [--slowdown 1] [--arrival 32]
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


def most_at_once(requests) -> int:
    """The most sessions in flight at one instant, a session from its first send to its last token."""
    roots = requests["parent_conversation"].fillna(requests["conversation"]).astype(int)
    spans = requests.assign(root=roots).groupby("root").agg(start=("t_send", "min"), end=("t_last", "max"))
    events = sorted([(t, 1) for t in spans["start"]] + [(t, -1) for t in spans["end"]], key=lambda e: (e[0], e[1]))
    now = best = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=256)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--think", type=float, default=2.0, help="mean think time (s), exponential")
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--tool-result-tokens", type=int, default=300)
    parser.add_argument("--slowdown", type=float, default=1.0, help="the simulator's times multiplied by this")
    parser.add_argument("--arrival", type=float, default=32.0, help="sessions arriving per second (Poisson)")
    args = parser.parse_args()
    candidate = Candidate.model_validate({
        "engine": "vllm", "model": {"id": "org/model"}, "knobs": {"max_running_requests": 4096},
        "extra_args": ["--sim-slowdown", f"{args.slowdown:g}"], "launch": {"simulator": True, "ready_timeout_s": 20}})
    plan = Plan.model_validate({
        "decode": None, "prefill": None, "warmup_requests": 1, "max_foreign_cpu_cores": 64, "remeasure_disturbed": 0,
        "agents": {"sessions": args.sessions, "arrival_rate_per_s": args.arrival, "turns": args.turns,
                   "system_tokens": 1500, "tool_schema_tokens": 1500, "repo_map_tokens": 1000,
                   "tool_result_tokens": {"distribution": "lognormal", "mean": args.tool_result_tokens, "cv": 1.0,
                                          "low": 20, "high": 4000},
                   "output_tokens": args.output_tokens, "think_time": {"mean_s": args.think},
                   "subagents": {"probability": 0.05, "turns": 2}, "max_lag_ms": 20}})
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        record = run_candidate(candidate, plan, Journal(folder), reporter=Reporter(quiet=True))
        if record.status != "completed":
            raise SystemExit(f"the run failed: {record.manifest.failure}")
        cell = record.table("cells").to_dict("records")[0]
        requests = record.table("requests")
        requests = requests[requests["cell_id"] == "agents"]
    wall = time.perf_counter() - started
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    used = (cpu.ru_utime - cpu_before.ru_utime) + (cpu.ru_stime - cpu_before.ru_stime)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    simulator = (children.ru_utime - children_before.ru_utime) + (children.ru_stime - children_before.ru_stime)
    span = float(requests["t_last"].max() - requests["t_send"].min())
    print(f"agent sessions against the simulator (times x{args.slowdown:g}): {args.sessions} sessions arriving at "
          f"{args.arrival:g}/s, {args.turns} turns each, think {args.think:g} s (mean), {args.output_tokens} output "
          f"tokens a turn")
    print(f"sessions in flight at once: {most_at_once(requests)} (of {cell['sessions']}, "
          f"{cell['subagents']} sub-agents besides)")
    chunks = float(requests["chunk_count"].sum())
    print(f"turns: {cell['turns']} in {span:.1f} s ({cell['turns'] / span:.0f}/s, {chunks / span:.0f} chunks/s), "
          f"errors {cell['errors']}, largest prompt {cell['context_tokens_max']} tokens, TTFT p50 "
          f"{1000 * cell['ttft_s']:.0f} ms")
    print(f"send lag: p50 {cell['send_lag_p50_ms']:.2f} ms, p99 {cell['send_lag_p99_ms']:.2f} ms "
          f"(aim: p99 < 20 ms); cell {'valid' if cell['valid'] else 'INVALID: ' + cell['invalid_codes']}")
    print(f"CPU in {wall:.1f} s: the run's own process {used:.1f} s, the processes it started (the simulator, any "
          f"senders) {simulator:.1f} s")


if __name__ == "__main__":
    main()
