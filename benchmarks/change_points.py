"""Does `servebook history` find a real step soon, and stay quiet on a flat series? Seeded series, known truth.

- Detection: a run history of `--before` runs at one level, then a step of `--step` percent (a slower engine
  release); after each new run the history is searched again, as a weekly CI job would. A step counts as found
  when a confirmed step lies within 2 runs of the true one by the time `--within` runs follow it. Figures: the
  share found, the runs it took, and how often at least 9 of 10 seeded series (the acceptance's unit) were found.
- False steps: flat series of `--flat-runs` runs; every confirmed step is false. Figure: false steps per 100 runs.
- Also at higher noise, to show where the method stops resolving a 5% step.

Noise is log-normal run to run, at `--noise` CV.

    .venv/bin/python benchmarks/change_points.py [--series 500] [--seed 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from servebook.estimates.changes import find_steps  # noqa: E402


def noisy(rng: np.random.Generator, level: float, runs: int, cv: float) -> list[float]:
    return list(level * np.exp(rng.normal(0.0, cv, runs)))


def detection(rng: np.random.Generator, series: int, before: int, within: int, step_pct: float,
              cv: float) -> tuple[float, float, float]:
    """(share found within `within` runs, mean runs after the step when found, share of 10-series sets with 9+)."""
    found: list[int | None] = []
    for _ in range(series):
        history = noisy(rng, 100.0, before, cv) + noisy(rng, 100.0 * (1 + step_pct / 100), within, cv)
        hit = next((after for after in range(1, within + 1)
                    if any(abs(s.index - before) <= 2 for s in find_steps(history[:before + after]))), None)
        found.append(hit)
    flags = [hit is not None for hit in found]
    sets = [sum(flags[i:i + 10]) >= 9 for i in range(0, len(flags) - 9, 10)]
    delays = [hit for hit in found if hit is not None]
    return (sum(flags) / len(flags), statistics.mean(delays) if delays else float("nan"),
            sum(sets) / len(sets) if sets else float("nan"))


def false_steps(rng: np.random.Generator, series: int, runs: int, cv: float) -> float:
    steps = sum(len(find_steps(noisy(rng, 100.0, runs, cv))) for _ in range(series))
    return 100.0 * steps / (series * runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=500)
    parser.add_argument("--before", type=int, default=20)
    parser.add_argument("--within", type=int, default=5)
    parser.add_argument("--step", type=float, default=-5.0)
    parser.add_argument("--flat-runs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    print(f"{args.step:+g}% step after {args.before} runs, found within 2 runs of it by {args.within} runs after; "
          f"{args.series} seeded series per row")
    print(f"{'noise CV':>9} {'found':>7} {'runs to find':>13} {'sets of 10 with 9+ found':>25} "
          f"{'false steps per 100 runs (flat, ' + str(args.flat_runs) + ' runs)':>44}")
    for cv in (0.02, 0.03, 0.05):
        share, delay, sets = detection(rng, args.series, args.before, args.within, args.step, cv)
        false = false_steps(rng, max(args.series // 5, 20), args.flat_runs, cv)
        print(f"{100 * cv:>8.0f}% {100 * share:>6.1f}% {delay:>13.2f} {100 * sets:>24.0f}% {false:>44.2f}")
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
