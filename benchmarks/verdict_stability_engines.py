"""Can noise flip a verdict? False rejections of A/A comparisons, detection of planted regressions.

For each engine, launches pools of independent runs, interleaved: the baseline (12 runs) and two
really slower configurations (8 runs each). Then, in many trials, judges a candidate against the
baseline the way `servebook sweep --until-decided` does: start at 3 runs per side, add one run per
side (drawn from the pools, without replacement) while the verdict is undecided, up to the pool.

- A/A: the baseline against itself (disjoint halves of its pool). Target: 0 rejections.
- Planted regressions, with the true effect printed as measured from the full pools. Target: at
  least 9 in 10 of the ~20% regression rejected.

Engines: the embedded llama.cpp (tiny model; slower configurations: `--poll 0`, about 8% slower
single-stream here, and `n_probs: 2` in every request, about 20%), and the simulator (vLLM flavor,
`--sim-slowdown 1.1` and `1.2`, launch-to-launch noise `--sim-run-noise 0.07` like this machine's).

    .venv/bin/python benchmarks/verdict_stability.py [--engine llamacpp|simulator|both] [--trials 20]
"""

from __future__ import annotations

import argparse
import math
import tempfile

import numpy as np

from servebook.config import Candidate, ComparisonRule, Plan, VerdictRules
from servebook.journal import Journal
from servebook.run import run_candidate
from servebook.util.progress import Reporter
from servebook.verdicts import judge_runs

PLAN = Plan.model_validate({"decode": {"concurrency": [1, 4], "categories": ["prose"], "output_tokens": 64,
                                       "rounds": 2, "min_cell_s": 1.5}, "prefill": None, "warmup_requests": 2})
RULES = VerdictRules(rules=[ComparisonRule(metric="aggregate_tok_s", concurrency=[1, 4], max_regression_pct=5)])
KNOBS = {"chunk_size": 512, "max_running_requests": 4, "context_length": 16384}


def configurations(engine: str) -> dict[str, dict]:
    if engine == "llamacpp":
        base = {"model": {"path": "tiny:target"}, "knobs": KNOBS}
        return {"baseline": base, "slower (--poll 0)": {**base, "extra_args": ["--poll", "0"]},
                "slower (n_probs 2)": {**base, "request_extras": {"n_probs": 2}}}
    base = {"engine": "vllm", "model": {"id": "org/model"}, "knobs": {"max_running_requests": 4},
            "launch": {"simulator": True, "ready_timeout_s": 30}}
    noise = ["--sim-run-noise", "0.07"]
    return {"baseline": {**base, "extra_args": noise},
            "slower (10% planted)": {**base, "extra_args": noise + ["--sim-slowdown", "1.1"]},
            "slower (20% planted)": {**base, "extra_args": noise + ["--sim-slowdown", "1.2"]}}


def pools(engine: str, journal: Journal, sizes: dict[str, int]) -> dict[str, list]:
    """Completed runs per configuration; runs already in `journal` (from --pools) are reused."""
    configs = configurations(engine)
    out: dict[str, list] = {name: [] for name in configs}
    for record in journal.runs():
        if record.status == "completed" and record.candidate_label in out:
            out[record.candidate_label].append((record.manifest, record.table("cells")))
    quiet = Reporter(quiet=True)
    for round_ in range(max(sizes.values())):
        for name, data in configs.items():  # interleaved, so drift hits every pool alike
            if len(out[name]) >= sizes[name]:
                continue
            record = run_candidate(Candidate.model_validate({"name": name, **data}), PLAN, journal, reporter=quiet)
            if record.status == "completed":
                out[name].append((record.manifest, record.table("cells")))
        print(f"  {engine}: round {round_ + 1} of {max(sizes.values())}", flush=True)
    return out


def true_effect(runs: list, baseline: list) -> str:
    def mean(pool, cell):
        values = [float(c.set_index("cell_id").at[cell, "aggregate_tok_s"]) for _, c in pool]
        return math.exp(np.mean(np.log(values)))
    cells = ["decode-prose-c1", "decode-prose-c4"]
    return ", ".join(f"{cell[-2:]} {100 * (mean(runs, cell) / mean(baseline, cell) - 1):+.1f}%" for cell in cells)


def adaptive(candidate: list, baseline: list, start: int = 3):
    n = start
    while True:
        verdict = judge_runs(candidate[:n], [c for _, c in baseline[:n]], RULES, is_baseline=False)
        if not verdict.undecided or n >= min(len(candidate), len(baseline)):
            return verdict.outcome, n
        n += 1


def trials(candidate_pool: list, baseline_pool: list, count: int, rng, same: bool) -> dict:
    outcomes, spent = [], []
    for _ in range(count):
        if same:
            order = rng.permutation(len(baseline_pool))
            half = len(order) // 2
            mine, theirs = [baseline_pool[i] for i in order[:half]], [baseline_pool[i] for i in order[half:]]
        else:
            mine = [candidate_pool[i] for i in rng.permutation(len(candidate_pool))]
            theirs = [baseline_pool[i] for i in rng.permutation(len(baseline_pool))]
        outcome, n = adaptive(mine, theirs)
        outcomes.append(outcome)
        spent.append(n)
    return {k: outcomes.count(k) for k in ("rejected", "inconclusive", "accepted")} | {
        "runs_per_side": float(np.mean(spent))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["llamacpp", "simulator", "both"], default="both")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pools", help="keep the runs in this folder (one journal per engine) and reuse them")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    engines = ["llamacpp", "simulator"] if args.engine == "both" else [args.engine]
    rows = []
    for engine in engines:
        names = list(configurations(engine))
        sizes = {names[0]: 12, names[1]: 8, names[2]: 8}
        if args.pools:
            runs = pools(engine, Journal(f"{args.pools}/{engine}"), sizes)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                runs = pools(engine, Journal(tmp), sizes)
        base = runs[names[0]]
        rows.append((engine, "A/A (baseline vs itself)", "0 (by construction)",
                     trials(base, base, args.trials, rng, same=True)))
        for name in names[1:]:
            rows.append((engine, name, true_effect(runs[name], base), trials(runs[name], base, args.trials, rng,
                                                                              same=False)))
    print(f"\nrule: aggregate decode at 1 and 4 requests within -5%; Welch intervals over runs, 95% for the verdict's "
          f"cells together; "
          f"{args.trials} adaptive trials each (3 runs per side, then +1 while undecided)")
    print(f"{'engine':10} {'comparison':28} {'true effect (pools)':26} {'rejected':>9} {'inconcl.':>9} "
          f"{'accepted':>9} {'runs/side':>9}")
    for engine, name, effect, r in rows:
        print(f"{engine:10} {name:28} {effect:26} {r['rejected']:>9} {r['inconclusive']:>9} {r['accepted']:>9} "
              f"{r['runs_per_side']:>9.1f}")


if __name__ == "__main__":
    main()
