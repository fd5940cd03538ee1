"""Does a configuration search find the best configuration, within its budget, and say honestly how sure it is?

The study is data/studies/search-sim.yaml: 108 configurations of slots x drafter x KV dtype for the simulator's
SGLang flavour, 12 of them pruned by the memory arithmetic. Its truth is the simulator's timing model, read from
each candidate's own engine command line (simulator/truth.py): the best configuration is known exactly.
Each search runs the real search code (pruning, screening, confirmation, judgement) on a runner that seals each
launch at once with the truth times log-normal launch-to-launch noise (sweeps.runner.ModelledRunner), because 50
searches of 30 real simulator launches would take hours. tests/integration/test_search.py runs a small search
through real simulator launches.

Per seeded search: launches spent; whether any pruned configuration was launched; whether the confirmed winner's
true figure lies within 3% of the true best; and whether it claimed "better than the runner-up" when the two were
truly within 1% of each other (a false claim).

    .venv/bin/python benchmarks/search_planted.py [--searches 50] [--noise 0.03,0.05]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from servebook.config import load_study  # noqa: E402
from servebook.journal import Journal  # noqa: E402
from servebook.simulator.truth import timing_for  # noqa: E402
from servebook.sweeps import search  # noqa: E402
from servebook.sweeps.runner import ModelledRunner  # noqa: E402
from servebook.sweeps.space import Space  # noqa: E402
from servebook.util.progress import Reporter  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--searches", type=int, default=50)
    parser.add_argument("--noise", default="0.03,0.05", help="launch-to-launch CVs, one row each")
    parser.add_argument("--study", default=str(ROOT / "data/studies/search-sim.yaml"))
    args = parser.parse_args()
    study = load_study(args.study)
    assert study.search is not None
    concurrency = study.search.objective.concurrency or 1
    truth = {}
    for config in Space(study.search.space).configs():
        candidate = study.base.with_overrides(config.overrides)
        truth[config.name] = timing_for(candidate).decode_tok_s(concurrency)
    started = time.monotonic()
    print(f"{study.name}: {len(truth)} configurations, budget {study.search.budget} launches, "
          f"{args.searches} seeded searches per row\n")
    header = (f"{'noise':>5} {'within 3%':>10} {'launches max':>13} {'pruned launched':>16} "
              f"{'claimed better':>15} {'false claims':>13} {'s/search':>9}")
    print(header)
    print("-" * len(header))
    for cv in (float(x) for x in args.noise.split(",")):
        row_started = time.monotonic()
        right = claimed = false_claims = pruned_launched = most = 0
        best_feasible = None
        for seed in range(args.searches):
            runner = ModelledRunner(seed=seed, launch_cv=cv)
            with tempfile.TemporaryDirectory() as folder:
                seeded = study.model_copy(update={"search": study.search.model_copy(update={"seed": seed})})
                result = search(seeded, Journal(folder), runner=runner, reporter=Reporter(quiet=True))
            pruned = {p.name for p in result.pruned}
            best_feasible = max(v for name, v in truth.items() if name not in pruned)
            pruned_launched += any(name in pruned for name in runner.launches)
            most = max(most, len(runner.launches))
            right += result.winner is not None and truth[result.winner] >= 0.97 * best_feasible
            if result.decision == "better":
                claimed += 1
                false_claims += result.runner_up is not None and \
                    abs(truth[result.winner] / truth[result.runner_up] - 1) < 0.01  # type: ignore[index]
        seconds = (time.monotonic() - row_started) / args.searches
        print(f"{100 * cv:>4.0f}% {right:>6}/{args.searches:<3} {most:>13} {pruned_launched:>16} "
              f"{claimed:>15} {false_claims:>13} {seconds:>9.1f}")
    print(f"\ntrue best {best_feasible:.1f} tok/s; {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
