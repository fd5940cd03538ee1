"""How close is servebook's single-stream decode rate to llama-server's own figure?

Runs the tiny candidate at concurrency 1 and compares, request by request, servebook's
(completion_tokens - 1) / (t_last - t_first) with the server's timings.predicted_per_second
for the same request. Prints the ratios; the target is within 2% (ratio 0.98 to 1.02).

    .venv/bin/python benchmarks/decode_rate_vs_server.py [--requests 8] [--tokens 256]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

from servebook import Journal, load_candidate
from servebook.config import DecodePlan, Plan
from servebook.run import run_candidate
from servebook.util.paths import repo_data_dir
from servebook.util.progress import Reporter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=256)
    args = parser.parse_args()

    candidate = load_candidate(repo_data_dir() / "candidates" / "tiny-llamacpp.yaml")
    candidate = candidate.with_overrides({"knobs.max_running_requests": 1})
    plan = Plan(name="bench-decode", decode=DecodePlan(concurrency=[1], categories=["prose"],
                                                       output_tokens=args.tokens, rounds=args.requests),
                prefill=None, warmup_requests=2)
    with tempfile.TemporaryDirectory() as tmp:
        record = run_candidate(candidate, plan, Journal(tmp), reporter=Reporter(quiet=True))
        requests = record.table("requests")
    if record.status != "completed":
        raise SystemExit(f"run failed: {record.manifest.get('failure')}")

    ratios = []
    print(f"{'request':<22} {'servebook tok/s':>16} {'server tok/s':>13} {'ratio':>7}")
    for row in requests.itertuples():
        ours = (row.completion_tokens - 1) / (row.t_last - row.t_first)
        theirs = row.server_predicted_per_second
        ratios.append(ours / theirs)
        print(f"{row.request_id:<22} {ours:16.1f} {theirs:13.1f} {ours / theirs:7.4f}")
    median = statistics.median(ratios)
    print(f"\nmedian ratio servebook/server: {median:.4f}  (min {min(ratios):.4f}, max {max(ratios):.4f}, "
          f"{len(ratios)} requests of {args.tokens} tokens)")
    print("within 2%" if abs(median - 1) <= 0.02 else "OUTSIDE the 2% target")


if __name__ == "__main__":
    main()
