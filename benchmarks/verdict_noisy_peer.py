"""Does one erratic candidate widen everyone's intervals? Seeded studies judged by the study model of one cell.

Each trial is a study interleaved in rounds: a baseline and 4 quiet candidates whose launches scatter at CV 3%,
and beside them one erratic candidate at CV 30% (a drafter that sometimes drafts nothing, a config that thrashes).
Every round adds a shared effect (the machine's mood in that round, CV 3%) to all its runs, so rounds are blocks.
The same quiet runs are judged twice: with the erratic peer in the study and without it. Figures:

- width: the median 90% interval width of the quiet candidates' contrasts beside the erratic peer, over the width
  without it (1.0: the peer costs the others nothing; the model shrinks each candidate's variance toward the
  study's, so a noisy peer should cost little);
- power: how often a quiet candidate with no true change is accepted within a 7% limit, with and without the peer;
- level: how often a quiet candidate exactly at the limit (-7%) is accepted, with and without the peer (a one-sided
  5% test: at most about 5%).

    .venv/bin/python benchmarks/verdict_noisy_peer.py [--trials 400] [--runs 4] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from servebook.estimates import ALPHA, fit_contrasts

QUIET_CV, ERRATIC_CV, ROUND_CV = 0.03, 0.30, 0.03
LIMIT = math.log(1 - 0.07)


def _sigma(cv: float) -> float:
    return math.sqrt(math.log(1 + cv * cv))


def draw_study(rng: np.random.Generator, runs: int, quiet_effects: list[float]) -> dict[str, list]:
    """name -> [(block, value)] for `runs` rounds of baseline, the quiet candidates and the erratic one."""
    groups: dict[str, list] = {"baseline": [], "erratic": []}
    groups.update({f"quiet-{i}": [] for i in range(len(quiet_effects))})
    for round_ in range(runs):
        block = ("host", f"round-{round_}")
        shared = rng.normal(0, _sigma(ROUND_CV))
        groups["baseline"].append((block, 100 * math.exp(shared + rng.normal(0, _sigma(QUIET_CV)))))
        groups["erratic"].append((block, 100 * math.exp(shared + rng.normal(0, _sigma(ERRATIC_CV)))))
        for i, effect in enumerate(quiet_effects):
            value = 100 * (1 + effect) * math.exp(shared + rng.normal(0, _sigma(QUIET_CV)))
            groups[f"quiet-{i}"].append((block, value))
    return groups


def judge(groups: dict[str, list]) -> dict[str, tuple[float, bool]]:
    """quiet candidate -> (90% interval width on the log scale, accepted within the limit)."""
    out = {}
    for name, contrast in fit_contrasts(groups, "baseline").items():
        if not name.startswith("quiet") or contrast.p_beyond(LIMIT, worse_is_lower=True) is None:
            continue
        from scipy import stats

        t = float(stats.t.ppf(1 - ALPHA, contrast.df))
        p_within, _ = contrast.p_beyond(LIMIT, worse_is_lower=True)  # type: ignore[misc]
        out[name] = (2 * t * float(contrast.se), p_within < ALPHA)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--runs", type=int, default=4, help="launches per candidate (rounds)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    widths_with, widths_without, null_with, null_without, at_limit, at_limit_alone = [], [], [], [], [], []
    for _ in range(args.trials):
        groups = draw_study(rng, args.runs, [0.0, 0.0, 0.0, -0.07])
        beside = judge(groups)
        alone = judge({name: runs for name, runs in groups.items() if name != "erratic"})
        for name in ("quiet-0", "quiet-1", "quiet-2"):
            widths_with.append(beside[name][0])
            widths_without.append(alone[name][0])
            null_with.append(beside[name][1])
            null_without.append(alone[name][1])
        at_limit.append(beside["quiet-3"][1])
        at_limit_alone.append(alone["quiet-3"][1])
    ratio = float(np.median(widths_with) / np.median(widths_without))
    print(f"{args.trials} studies, {args.runs} runs per candidate, quiet CV {QUIET_CV:.0%}, erratic peer CV "
          f"{ERRATIC_CV:.0%}, rounds CV {ROUND_CV:.0%} ({time.perf_counter() - started:.1f} s)")
    print(f"  interval width beside the erratic peer / without it:   {ratio:.2f}x")
    print(f"  no true change accepted within 7%, beside the peer:    {np.mean(null_with):.1%}")
    print(f"  no true change accepted within 7%, without the peer:   {np.mean(null_without):.1%}")
    print(f"  exactly at the limit (-7%) accepted, beside the peer:  {np.mean(at_limit):.1%}  (level 5%)")
    print(f"  exactly at the limit (-7%) accepted, without the peer: {np.mean(at_limit_alone):.1%}  (level 5%)")


if __name__ == "__main__":
    main()
