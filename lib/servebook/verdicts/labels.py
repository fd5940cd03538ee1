"""How every output labels and counts outcomes (JSON, Markdown, JUnit, CSV, the site, `report`): the baseline
labelled "baseline" and counted apart, so that "2 accepted" means two candidates the rules accepted everywhere."""

from __future__ import annotations

from collections.abc import Iterable

#: how outcomes rank: a candidate the rules accept first, one more runs may still decide next
OUTCOME_ORDER = {"accepted": 0, "inconclusive": 1, "rejected": 2, "failed": 3, "missing": 4}


def outcome_label(outcome: str, is_baseline: bool) -> str:
    """An outcome as every output labels it (JSON, Markdown, JUnit, CSV, the site, `report`): the baseline's own
    acceptance reads "baseline", as it is the reference every candidate is compared with, not a candidate the rules
    accepted; every other outcome as it is ("missing": never run)."""
    return "baseline" if is_baseline and outcome == "accepted" else outcome


def outcome_counts(outcomes: Iterable[tuple[str, bool]]) -> dict[str, int]:
    """How many candidates have each outcome, in ranking order, from (outcome, is the baseline) pairs: the baseline
    is counted apart (not at all), so that "2 accepted" counts two candidates the rules accepted in every output."""
    counts: dict[str, int] = {}
    for outcome, is_baseline in outcomes:
        if not is_baseline:
            counts[outcome] = counts.get(outcome, 0) + 1
    return {o: counts[o] for o in sorted(counts, key=lambda o: (OUTCOME_ORDER.get(o, len(OUTCOME_ORDER)), o))}


def counts_text(counts: dict[str, int]) -> str:
    """'1 accepted, 2 inconclusive, 3 rejected', or 'none'."""
    return ", ".join(f"{n} {outcome}" for outcome, n in counts.items()) or "none"
