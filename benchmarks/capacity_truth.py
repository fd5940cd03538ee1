"""Does a capacity search find the capacity the simulator truly has, and does a verdict catch a planted 10% loss?

The truth: the simulator's own scheduling (slots first come first served, a prefill per prompt, a step per token
whose length depends on the sequences running) replayed in virtual time (simulator/truth.py), on the same
seeded Poisson schedules and probe windows the client sends, averaged over 150 seeds per rate. The capacity is the
rate at which that expected attainment crosses the target. The measured side: real simulator launches (vLLM flavour,
16 slots, every duration doubled so that the client's own few milliseconds stay small beside 30-60 ms steps), each
searched by `plan.capacity` through notebooks/qualify.ipynb, interleaved with a planted configuration whose every
duration is longer by the factor that costs 10% of capacity in the truth; then judged with
`{metric: capacity_rps, max_regression_pct: 5}`.

Per launch: the capacity found against the truth (error %), the probes spent, whether the truth lies in the
search's own interval. Then the verdict at 3 launches per side.

    .venv/bin/python benchmarks/capacity_truth.py [--repeats 3] [--min-requests 80]
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from servebook.config import load_study  # noqa: E402
from servebook.config.load import (  # noqa: E402
    CapacitySearch,  # noqa: E402
    LoadPlan,
    ServiceObjectives,
)
from servebook.journal import Journal  # noqa: E402
from servebook.measure.kinds.capacity.search import Probe, capacity_of, search  # noqa: E402
from servebook.measure.openloop import attainment_interval, probe_window, schedule  # noqa: E402
from servebook.simulator.config import TimingModel  # noqa: E402
from servebook.simulator.truth import open_loop_latencies  # noqa: E402
from servebook.verdicts import judge  # noqa: E402

SLOTS, SLOWDOWN, PROMPT, OUTPUT = 16, 2.0, 256, 32
SLO = ServiceObjectives(ttft_s=0.3, tpot_s=0.05, attainment=0.9)
PROBE_S, WARMUP_S = 3.0, 1.0


def expected_attainment(timing: TimingModel, rate: float, min_requests: int, seeds: int = 150) -> float:
    """The share of a probe's measured requests meeting the objectives, averaged over seeded schedules."""
    shares = []
    for seed in range(seeds):
        plan = LoadPlan(warmup_s=WARMUP_S, prompt_tokens={"mean": PROMPT}, output_tokens={"mean": OUTPUT}, seed=seed)
        window = probe_window(plan, rate, PROBE_S, min_requests)
        arrivals = schedule(plan.model_copy(update={"duration_s": window}), rate)
        latencies = open_loop_latencies(timing, [(a.due_s, a.prompt_tokens, a.output_tokens) for a in arrivals])
        met = [ttft <= (SLO.ttft_s or math.inf) and tpot <= (SLO.tpot_s or math.inf)
               for a, (ttft, tpot) in zip(arrivals, latencies, strict=True) if a.measured]
        shares.append(sum(met) / len(met))
    return sum(shares) / len(shares)


def true_capacity(slowdown: float, min_requests: int, seeds: int = 150) -> float:
    """Bisect the expected attainment's crossing of the target on a log scale, to 0.5%."""
    timing = TimingModel(slots=SLOTS, slowdown=slowdown)
    low, high = 1.0, 32.0
    while high / low > 1.005:
        middle = math.sqrt(low * high)
        if expected_attainment(timing, middle, min_requests, seeds) >= SLO.attainment:
            low = middle
        else:
            high = middle
    return math.sqrt(low * high)


def planted_slowdown(target_loss: float, min_requests: int, baseline: float) -> float:
    """The slowdown whose true capacity is `target_loss` below the baseline's."""
    low, high = SLOWDOWN, SLOWDOWN * 1.3
    for _ in range(6):
        middle = (low + high) / 2
        if true_capacity(middle, min_requests) > baseline * (1 - target_loss):
            low = middle
        else:
            high = middle
    return (low + high) / 2


def study_yaml(repeats: int, planted: float, min_requests: int) -> str:
    return f"""
name: capacity-truth
repeats: {repeats}
base:
  engine: vllm
  model: {{id: org/model}}
  knobs: {{max_running_requests: {SLOTS}}}
  extra_args: [--sim-slowdown, "{SLOWDOWN}", --sim-run-noise, "0.01"]
  launch: {{simulator: true, ready_timeout_s: 30}}
variants:
  - name: planted
    set: {{extra_args: [--sim-slowdown, "{planted:.4f}", --sim-run-noise, "0.01"]}}
plan:
  decode: null
  prefill: null
  warmup_requests: 2
  max_foreign_cpu_cores: 4
  load:
    warmup_s: {WARMUP_S}
    prompt_tokens: {{mean: {PROMPT}}}
    output_tokens: {{mean: {OUTPUT}}}
  slo: {{ttft_s: {SLO.ttft_s}, tpot_s: {SLO.tpot_s}, attainment: {SLO.attainment}}}
  capacity: {{low_rps: 1, max_probes: 12, precision_pct: 5, probe_s: {PROBE_S}, min_requests: {min_requests}}}
verdict:
  baseline: baseline
  rules:
    - {{metric: capacity_rps, max_regression_pct: 5}}
"""


def des_search(timing: TimingModel, seed: int, min_requests: int, narrowing: int, speed: float | None = None) -> dict:
    """One capacity search (measure.kinds.capacity.search, unchanged) whose probes are the simulator's scheduling replayed in
    virtual time on seeded schedules: the search's own precision, without the clock of a real launch."""
    import asyncio

    def probe_at(rate: float, requests: int) -> Probe:
        plan = LoadPlan(warmup_s=WARMUP_S, prompt_tokens={"mean": PROMPT}, output_tokens={"mean": OUTPUT}, seed=seed)
        window = probe_window(plan, rate, PROBE_S, requests)
        arrivals = schedule(plan.model_copy(update={"duration_s": window}), rate)
        latencies = open_loop_latencies(timing, [(a.due_s, a.prompt_tokens, a.output_tokens) for a in arrivals],
                                        speed)
        met = [ttft <= (SLO.ttft_s or math.inf) and tpot <= (SLO.tpot_s or math.inf)
               for a, (ttft, tpot) in zip(arrivals, latencies, strict=True) if a.measured]
        share, low, high, _ = attainment_interval(met)
        return Probe(rate, len(met), share, low, high)

    async def probe(rate: float, requests: int) -> Probe:
        return probe_at(rate, requests)

    spec = CapacitySearch(low_rps=1, max_probes=12, precision_pct=5, probe_s=PROBE_S, min_requests=min_requests,
                          narrowing_requests=narrowing)
    probes = asyncio.run(search(probe, spec, SLO.attainment))
    return {**capacity_of(probes, SLO.attainment, spec.precision_pct), "requests": sum(p.requests for p in probes)}


def virtual_searches(sizes: list[tuple[int, int]], searches: int, truth: float) -> None:
    print(f"{'requests per probe':>18} {'within 5%':>10} {'median error':>13} {'probes max':>10} "
          f"{'truth in interval':>18} {'requests, median':>17}")
    timing = TimingModel(slots=SLOTS, slowdown=SLOWDOWN)
    for bracketing, narrowing in sizes:
        found = [des_search(timing, 1000 + seed, bracketing, narrowing) for seed in range(searches)]
        errors = sorted(abs(100 * (f["capacity_rps"] / truth - 1)) if f["capacity_rps"] else math.inf for f in found)
        inside = sum((f["capacity_low_rps"] or 0) <= truth <= (f["capacity_high_rps"] or math.inf) for f in found)
        spent = sorted(f["requests"] for f in found)
        print(f"{f'{bracketing} then {narrowing}':>18} {sum(e <= 5 for e in errors):>5} of {searches:<2} "
              f"{errors[len(errors) // 2]:12.1f}% {max(f['capacity_probes'] for f in found):>10} "
              f"{inside:>11} of {searches:<3} {spent[len(spent) // 2]:>17}")


def virtual_verdicts(trials: int, repeats: int, run_noise: float, bracketing: int, narrowing: int) -> None:
    """A planted 10% capacity loss judged by the verdict code (`{metric: capacity_rps, max_regression_pct: 5}`),
    `repeats` searches per side, each launch drawing its own speed (lognormal, CV `run_noise`, as the simulator's
    --sim-run-noise does); and the same baseline against itself, which must not be rejected. Two ways of drawing
    the arrivals: as runs draw them now (the runs of one interleaving round share the round's seed, and the verdict
    blocks by round), and as every launch having a pattern of its own (the arrivals' luck left in the noise)."""
    import numpy as np
    import pandas as pd

    from servebook.config.rules import ComparisonRule
    from servebook.verdicts import compare_rule, settle

    planted = planted_slowdown(0.10, narrowing, true_capacity(SLOWDOWN, narrowing, seeds=60))
    rule = ComparisonRule(metric="capacity_rps", max_regression_pct=5)
    print(f"planted slowdown {planted:.4f} (10% less long-run capacity), {repeats} launches per side, launch noise "
          f"CV {run_noise:.0%}, {trials} trials, rule {{metric: capacity_rps, max_regression_pct: 5}}:")
    for shared in (True, False):
        rng = np.random.default_rng(5)

        def runs(slowdown: float, trial: int, side: int, rng: np.random.Generator = rng,
                 shared: bool = shared) -> list[pd.DataFrame]:
            frames = []
            for k in range(repeats):
                speed = slowdown * float(rng.lognormal(0.0, run_noise))
                seed = 100 * trial + k if shared else 10_000 * side + 100 * trial + k
                found = des_search(TimingModel(slots=SLOTS, slowdown=SLOWDOWN), seed, bracketing, narrowing,
                                   speed=speed)
                frames.append(pd.DataFrame([{"cell_id": "capacity", "kind": "capacity", "category": "prose",
                                             "concurrency": 0, "valid": True, **found}]))
            return frames

        def outcome(candidate: list[pd.DataFrame], baseline: list[pd.DataFrame]) -> str:
            comparisons = compare_rule(candidate, baseline, rule)
            settle(comparisons, 0.05)
            if any(c.decision == "fail" for c in comparisons):
                return "rejected"
            return "accepted" if comparisons and all(c.decision == "pass" for c in comparisons) else "inconclusive"

        planted_outcomes, null_outcomes = [], []
        for trial in range(trials):
            baseline = runs(SLOWDOWN, trial, 1)
            planted_outcomes.append(outcome(runs(planted, trial, 2), baseline))
            null_outcomes.append(outcome(runs(SLOWDOWN, trial, 3), baseline))
        print("  " + ("a round's runs share its arrivals (now):" if shared else "every launch its own arrivals (before):"))
        for name, outcomes in (("planted 10% loss", planted_outcomes), ("no change", null_outcomes)):
            print(f"    {name:>16}: " + ", ".join(f"{o} {outcomes.count(o)}" for o in ("rejected", "inconclusive",
                                                                                        "accepted")))


def coverage(min_requests: int, seeds: int = 300) -> None:
    """How often a probe's 95% interval holds the expected attainment (over seeds) at rates around the capacity."""
    from scipy import stats

    truth = true_capacity(SLOWDOWN, min_requests)
    timing = TimingModel(slots=SLOTS, slowdown=SLOWDOWN)
    print(f"{'rate':>6} {'expected':>9} {'binomial covers':>16} {'effective covers':>17}")
    for factor in (0.8, 0.9, 1.0, 1.1, 1.25):
        rate, rows = truth * factor, []
        for seed in range(seeds):
            plan = LoadPlan(warmup_s=WARMUP_S, prompt_tokens={"mean": PROMPT}, output_tokens={"mean": OUTPUT},
                            seed=seed)
            arrivals = schedule(plan.model_copy(update={"duration_s": probe_window(plan, rate, PROBE_S,
                                                                                  min_requests)}), rate)
            latencies = open_loop_latencies(timing, [(a.due_s, a.prompt_tokens, a.output_tokens) for a in arrivals])
            met = [ttft <= (SLO.ttft_s or math.inf) and tpot <= (SLO.tpot_s or math.inf)
                   for a, (ttft, tpot) in zip(arrivals, latencies, strict=True) if a.measured]
            exact = stats.binomtest(sum(met), len(met)).proportion_ci(0.95, method="exact")
            rows.append((*attainment_interval(met)[:3], exact.low, exact.high))
        expected = sum(r[0] for r in rows) / len(rows)
        ours = sum(r[1] <= expected <= r[2] for r in rows) / len(rows)
        binomial = sum(r[3] <= expected <= r[4] for r in rows) / len(rows)
        print(f"{rate:6.2f} {expected:9.3f} {binomial:16.0%} {ours:17.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--min-requests", type=int, default=80)
    parser.add_argument("--searches", type=int, default=50, help="virtual-time searches per probe size")
    parser.add_argument("--sizes", default="80/80,80/400,80/800,2000/2000",
                        help="requests per probe while bracketing / inside the bracket, in the virtual-time searches")
    parser.add_argument("--trials", type=int, default=20, help="virtual-time verdicts on a planted 10%% loss")
    parser.add_argument("--launch", action="store_true", help="also launch the simulator: 2 x --repeats real runs")
    args = parser.parse_args()
    started = time.monotonic()
    print(f"{SLOTS} slots, {PROMPT}-token prompts, {OUTPUT} output tokens, slowdown {SLOWDOWN}; {SLO.describe()}\n")
    print(f"A probe's 95% interval of attainment against the expected one, {args.min_requests} requests per probe:")
    coverage(args.min_requests)
    long_run = true_capacity(SLOWDOWN, 1000, seeds=100)
    print(f"\nCapacity searches on the simulator's scheduling in virtual time, against the long-run truth "
          f"{long_run:.3f} requests/s (1,000-request windows):")
    sizes = [tuple(int(x) for x in pair.split("/")) for pair in args.sizes.split(",")]
    virtual_searches([(a, b) for a, b in sizes], args.searches, long_run)
    print(f"[{time.monotonic() - started:.0f} s]\n")
    if args.trials:
        virtual_verdicts(args.trials, args.repeats, 0.01, 80, 800)
        print(f"[{time.monotonic() - started:.0f} s]")
    if args.launch:
        launched(args.repeats, args.min_requests)
    print(f"\n{time.monotonic() - started:.0f} s in all")


def launched(repeats: int, min_requests: int) -> None:
    truth = true_capacity(SLOWDOWN, min_requests)
    planted = planted_slowdown(0.10, min_requests, truth)
    planted_truth = true_capacity(planted, min_requests)
    print(f"\nReal simulator launches: truth {truth:.3f} requests/s; planted slowdown {planted:.4f} holds "
          f"{planted_truth:.3f} ({100 * (planted_truth / truth - 1):+.1f}%)")
    with tempfile.TemporaryDirectory() as tmp:
        study_path = Path(tmp) / "study.yaml"
        study_path.write_text(study_yaml(repeats, planted, min_requests))
        journal = Path(tmp) / "journal"
        subprocess.run([sys.executable, "-m", "servebook.cli", "sweep", str(study_path), "--journal", str(journal)],
                       cwd=ROOT, check=True, capture_output=True, text=True)
        study = load_study(study_path)
        header = f"{'candidate':>9} {'run':>8} {'found':>7} {'interval':>16} {'truth':>7} {'error':>7} {'probes':>6} " \
                 f"{'truth inside':>12}"
        print(header)
        print("-" * len(header))
        errors = []
        for record in Journal(journal).runs():
            name = record.manifest.candidate["name"]
            expected = truth if name == "baseline" else planted_truth
            row = record.table("cells").set_index("cell_id").loc["capacity"]
            found, low, high = (float(row[k]) for k in ("capacity_rps", "capacity_low_rps", "capacity_high_rps"))
            errors.append(100 * (found / expected - 1))
            print(f"{name:>9} {record.run_id[-6:]:>8} {found:7.3f} {f'[{low:.3f}, {high:.3f}]':>16} {expected:7.3f} "
                  f"{errors[-1]:+6.1f}% {int(row['capacity_probes']):6d} {str(low <= expected <= high):>12}")
        print(f"\nwithin 5% of the truth: {sum(abs(e) <= 5 for e in errors)} of {len(errors)} launches")
        for item in judge(study, Journal(journal), append=False):
            print(f"verdict {item.entry.name}: {item.verdict.outcome if item.verdict else '-'}: "
                  + "; ".join(item.verdict.reasons[:2] if item.verdict else []))


if __name__ == "__main__":
    main()
