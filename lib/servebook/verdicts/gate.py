"""A study's verdicts as a CI gate: which outcomes fail the job, and the exit code that says which did.

Codes decide: a job reads the exit status, never the printed reasons. The codes sit above servebook's error
codes (1 to 4, 130) so that "the gate failed" and "servebook could not run" stay apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..util.errors import InputError
from .comparisons import UNDECIDED, Comparison
from .judge import Judged
from .verdict import Verdict

#: outcome -> exit status, in order of precedence when a study has several (a proven regression first)
GATE_EXIT_CODES: dict[str, int] = {"rejected": 10, "failed": 11, "inconclusive": 12, "missing": 13}
GATE_OUTCOMES = tuple(GATE_EXIT_CODES)


def parse_fail_on(text: str | None, name: str = "--fail-on") -> frozenset[str]:
    """`rejected,failed[,inconclusive][,missing]` -> the outcomes that fail the job; None (not given): nothing
    fails. Given but naming no outcome (`--fail-on ""`, a CI variable left empty) is refused: it would turn the gate
    off without a word."""
    chosen = frozenset(part.strip() for part in (text or "").split(",") if part.strip())
    if text is not None and not chosen:
        raise InputError(f"{name} {text!r}: names no outcome, so nothing would fail the job; name one or more of "
                         f"{', '.join(GATE_OUTCOMES)} (comma-separated), or leave {name} out")
    unknown = sorted(chosen - set(GATE_OUTCOMES))
    if unknown:
        raise InputError(f"{name} {', '.join(unknown)}: choose among {', '.join(GATE_OUTCOMES)} "
                         "(comma-separated)")
    return chosen


def gate_outcome(item: Judged) -> str:
    """A candidate's outcome as the gate counts it: `missing` when it has no run at all."""
    return "missing" if item.verdict is None else item.verdict.outcome


@dataclass(frozen=True)
class GateResult:
    """What failed the gate (outcome -> candidate names) and the exit status it earns."""

    fail_on: frozenset[str]
    failing: dict[str, list[str]]

    @property
    def exit_code(self) -> int:
        return next((code for outcome, code in GATE_EXIT_CODES.items() if self.failing.get(outcome)), 0)

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def describe(self) -> str:
        if not self.fail_on:
            return "gate: not set (--fail-on), exit 0"
        if self.passed:
            return f"gate passed: no candidate {' or '.join(sorted(self.fail_on))}"
        found = "; ".join(f"{outcome}: {', '.join(names)}" for outcome, names in self.failing.items() if names)
        return f"gate failed (exit {self.exit_code}): {found}"


def gate(judged: list[Judged], fail_on: frozenset[str]) -> GateResult:
    failing: dict[str, list[str]] = {}
    for item in judged:
        outcome = gate_outcome(item)
        if outcome in fail_on:
            failing.setdefault(outcome, []).append(item.entry.name)
    return GateResult(fail_on, {o: failing[o] for o in GATE_OUTCOMES if o in failing})


def deciding(verdict: Verdict) -> Comparison | None:
    """The cell a reader should see first: for a rejection the cell furthest beyond its limit; for an
    inconclusive verdict the undecided cell nearest to failing; for an acceptance the cell closest to its limit."""
    def regression_bound(c: Comparison) -> float:
        # the worst the data allows, as a regression in percent of the limit's direction
        worst = c.change_high_pct if c.lower_is_better else c.change_low_pct
        if worst is None:
            worst = c.change_pct
        if worst is None:
            return float("-inf")
        return (worst if c.lower_is_better else -worst) - c.limit_pct

    pool = {"rejected": [c for c in verdict.comparisons if not c.ok and c.decision == "fail"],
            "inconclusive": [c for c in verdict.comparisons if c.decision in UNDECIDED]}
    chosen = pool[verdict.outcome] if verdict.outcome in pool else verdict.comparisons
    return max(chosen, key=regression_bound, default=None)
