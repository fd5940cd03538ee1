"""A study's answer: the configuration to run and why, and every candidate ranked with the cells that decided it.

Typed fields decide (each candidate's outcome, each cell's decision, bounds and `better`); the sentences only
say what they decided. The same `Answer` is drawn by `servebook report`, the CI Markdown, the study page of the
site and notebooks, so they cannot disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from ..config.metrics import LOWER_IS_BETTER
from ..config.study import Study
from .comparisons import UNDECIDED, Comparison
from .gate import deciding
from .judge import Judged
from .labels import OUTCOME_ORDER, counts_text, outcome_counts, outcome_label
from .left_out import LeftOut, LeftOutCell, left_out_reasons
from .output import Caveat, evidence_words
from .scaling import ScalingComparison
from .side_effects import SideEffect, line
from .verdict import Verdict

#: cells named per candidate at most, beyond the gains (the rest are in the verdict's reasons)
SHOWN_CELLS = 3
_FIELDS = {f.name for f in fields(Comparison)}
_SCALING_FIELDS = {f.name for f in fields(ScalingComparison)}


def comparison_from(data: dict) -> Comparison:
    """A Comparison from a verdict event's dict, written by this or an older servebook (unknown keys dropped); a
    scaling rule's cell (it carries `min_efficiency`) as the ScalingComparison it was, which says it in its words."""
    if "min_efficiency" in data:
        return ScalingComparison(**{k: v for k, v in data.items() if k in _SCALING_FIELDS})
    return Comparison(**{k: v for k, v in data.items() if k in _FIELDS})


#: what each realism code (measure/figures/realism.py) says of a cell's output, in the words a verdict's reader gets
OUTPUT_WORDS = {"output_loops": "the output loops", "prompt_echo": "the output repeats the prompt",
                "forced_tail": "most of the output was forced past the model's end"}

@dataclass
class Entrant:
    """One study candidate as the answer sees it: typed outcome and cells, the verdict's reasons, its runs."""

    name: str
    outcome: str  # accepted, rejected, inconclusive, failed, or missing (never run)
    comparisons: list[Comparison] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    is_baseline: bool = False
    note: str | None = None
    #: what decided its verdict (the verdict's `method`), None where no interval was computed
    method: str | None = None
    #: gains that may not hold on real output (verdicts.output), and its drafter evidence and output realism
    caveats: list[Caveat] = field(default_factory=list)
    evidence: dict | None = None
    #: changes beyond the noise in figures no rule judges, worse first (verdicts.side_effects)
    side_effects: list[SideEffect] = field(default_factory=list)
    #: cells its verdict left out as disturbed (verdicts.left_out)
    left_out_cells: list[LeftOutCell] = field(default_factory=list)

    @property
    def gains_only_on_unrealistic_output(self) -> bool:
        """Every gain beyond the noise it has lies in a cell whose output loops or is mostly forced tail: nothing
        to recommend it on but evidence a drafter earns by construction."""
        flagged = {(c.cell_id, c.metric) for c in self.caveats}
        gains = [c for c in self.comparisons if c.better]
        return bool(flagged) and all((c.cell_id, c.metric) in flagged for c in gains)


@dataclass
class Standing:
    """An entrant's place: its rank among the candidates (None for the baseline), its mean change over the judged
    cells, the cells that decided its verdict and its gains beyond the noise."""

    entrant: Entrant
    rank: int | None
    mean_change_pct: float | None
    decisive: list[Comparison]
    gains: list[Comparison]

    @property
    def name(self) -> str:
        return self.entrant.name

    @property
    def outcome(self) -> str:
        return outcome_label(self.entrant.outcome, self.entrant.is_baseline)

    def cells_text(self) -> str:
        """The decisive cells in words, each with the interval the verdict used."""
        if self.entrant.is_baseline:
            return "; ".join(self.entrant.reasons[:1]) or "the reference every candidate is compared with"
        if self.entrant.outcome == "missing":
            return "never run"
        parts = [_cell_words(c, self.entrant.outcome) for c in self.decisive]
        if not parts:
            parts = self.entrant.reasons[:1]
        return "; ".join(parts)

    def gains_text(self) -> str:
        """The gains beyond the noise, each said with what its output was where a caveat names its cell."""
        said = [c.text() + self._measured_where(c) for c in self.gains]
        return ("better beyond the noise: " + "; ".join(said)) if said else ""

    def _measured_where(self, c: Comparison) -> str:
        """' (measured where the output loops)' where a caveat names the gain's cell, else ''."""
        caveated = {cav.cell_id: cav.codes for cav in self.entrant.caveats}
        if c.cell_id not in caveated:
            return ""
        return " (measured where " + " and ".join(OUTPUT_WORDS[code] for code in caveated[c.cell_id]) + ")"

    @property
    def deciding(self) -> Comparison | None:
        """The cell that decided the verdict (the first of the decisive ones); None for the baseline."""
        return None if self.entrant.is_baseline or not self.decisive else self.decisive[0]

    def deciding_text(self) -> str:
        """The deciding cell in one clause, its limit left to the study's limits said once: 'aggregate decode, prose
        at 16 requests: -4.3% [-10.8, +5.8], undecided, about 37 runs per side would likely decide it'; where no
        cell decided it, its first reason ('-' for a sound baseline)."""
        cell = self.deciding
        if cell is not None:
            return f"{cell.name}: {cell.figure()}, {decision_words(cell, self.entrant.outcome)}"
        if self.entrant.outcome == "missing":
            return "never run"
        if self.entrant.is_baseline and self.entrant.outcome == "accepted":
            return "-"
        return self.entrant.reasons[0] if self.entrant.reasons else "-"

    @property
    def best_gain(self) -> Comparison | None:
        """The gain beyond the noise that is largest in its rule's better direction, on the log scale."""
        return max(self.gains, key=_gain, default=None)

    def best_gain_text(self) -> str:
        """'aggregate decode, prose at 1 request: +103.6% [+68.9, +171.3]' ('-' where none)."""
        c = self.best_gain
        return "-" if c is None else f"{c.name}: {c.figure()}{self._measured_where(c)}"

    def worst_side_effect_text(self) -> str:
        """The worst of its side effects (they come worse first), '-' where none is worse."""
        worst = next((e for e in self.entrant.side_effects if e.worse), None)
        return "-" if worst is None else worst.text()

    @property
    def left_out(self) -> LeftOut:
        return LeftOut.of(self.entrant.left_out_cells)

    def line(self) -> str:
        """Everything a reader needs of the candidate in one line, the fields of its ranking row said in words:
        '2. ngram: inconclusive, 6 runs, mean change -2.8%; deciding cell: ...; worst side effect: ...'."""
        head = [self.outcome] + ([f"{len(self.entrant.run_ids)} run{'s' if len(self.entrant.run_ids) != 1 else ''}"]
                                 if self.entrant.run_ids else [])
        if self.mean_change_pct is not None and not self.entrant.is_baseline:
            head.append(f"mean change {_pct(self.mean_change_pct)}")
        named = "deciding cell" if self.deciding is not None else "why"
        parts = [(f"{named}: ", self.deciding_text()), ("best gain: ", self.best_gain_text()),
                 ("worst side effect: ", self.worst_side_effect_text()), ("", self.left_out.text() or "-"),
                 ("drafter and output: ", evidence_words(self.entrant.evidence)), ("note: ", self.entrant.note or "-")]
        said = [label + text for label, text in parts if text != "-"]
        rank = "-" if self.rank is None else f"{self.rank}."
        return f"{rank} {self.name}: " + "; ".join([", ".join(head), *said])

    def side_effects_text(self) -> str:
        """The worse side effects, worst first, in one clause ('' where none is worse)."""
        return line(self.entrant.side_effects)

    def side_effects_line(self) -> str:
        """'ngram (rejected): worse beyond the noise: TPOT p50, reuse: x2.9 [x1.8, x4.8]; ...; 2 better': the
        candidate's side effects in one line, worse ones first; None-worth where it has none."""
        effects = self.entrant.side_effects
        better = sum(1 for e in effects if not e.worse)
        worse = self.side_effects_text()
        said = [f"worse beyond the noise: {worse}" if worse else "nothing worse beyond the noise"]
        said += [f"{better} better"] if better else []
        return f"{self.name} ({self.outcome}): " + "; ".join(said)

    def reason(self) -> str:
        """One line: the outcome, the cells that decided it and the gains beyond the noise."""
        parts = [f"{self.outcome}: {self.cells_text()}"]
        if self.gains:
            parts.append(self.gains_text())
        return "; ".join(p for p in parts if p)


@dataclass
class Answer:
    study: str
    question: str | None
    baseline: str
    standings: list[Standing]
    #: what recommends: the best accepted candidate, else the baseline; None when not even the baseline is sound
    recommended: Standing | None
    #: what decided the verdicts, without the "method:" label the renderers put before it
    method: str | None = None

    #: accepted candidates passed over because their gains rest on unrealistic output alone, in rank order
    passed_over: list[Standing] = field(default_factory=list)

    def headline(self) -> str:
        if self.recommended is None:
            return "No recommendation: the baseline itself has no valid runs to compare against"
        if self.recommended.entrant.is_baseline:
            which = "" if self.recommended.name == "baseline" else " (the baseline)"
            why = ("no accepted candidate gained on output that neither loops nor is forced past its end"
                   if self.passed_over else "no candidate is accepted")
            return f"Recommended: {self.recommended.name}{which}, as {why}"
        return f"Recommended: {self.recommended.name}"

    def why(self) -> list[str]:
        """The reasons for the recommendation, decisive cells first."""
        ranked = [s for s in self.standings if not s.entrant.is_baseline]
        tally = _tally(ranked)
        chosen = self.recommended
        if chosen is None:
            base = next((s for s in self.standings if s.entrant.is_baseline), None)
            return [base.reason() if base else f"the baseline {self.baseline} was never run"]
        passed = [f"{s.name} is accepted but not recommended: {_passed_over_words(s)}" for s in self.passed_over]
        if not chosen.entrant.is_baseline:
            accepted = [s for s in ranked if s.entrant.outcome == "accepted" and s not in self.passed_over]
            lines = [f"accepted against {self.baseline}: every judged cell within its limit; "
                     f"{chosen.cells_text()}"]
            if chosen.gains:
                lines.append(chosen.gains_text())
            if chosen.side_effects_text():
                lines.append(f"but worse beyond the noise where no rule looks: {chosen.side_effects_text()}")
            if not chosen.gains:
                lines.append("no cell better than the baseline beyond the noise: it qualifies, it does not win")
            if len(accepted) > 1:
                lines.append(f"first of {len(accepted)} accepted by the mean change over the judged cells "
                             f"({_pct(chosen.mean_change_pct)}, then "
                             + ", ".join(f"{s.name} {_pct(s.mean_change_pct)}" for s in accepted[1:]) + ")")
            return lines + passed + [f"of {len(ranked)} candidates: {tally}"]
        if self.passed_over:
            lines = [f"no candidate is recommended ({tally}), so the baseline stays", *passed]
        else:
            lines = [f"no candidate is accepted ({tally}), so the baseline stays"]
        undecided = [s for s in ranked if s.entrant.outcome == "inconclusive"]
        if undecided:
            first = undecided[0]
            cell = _cell_words(first.decisive[0], "inconclusive") if first.decisive else first.cells_text()
            lines.append(f"closest: {first.name} (inconclusive, mean change {_pct(first.mean_change_pct)}): {cell}"
                         + (f"; {first.gains_text()}" if first.gains else "")
                         + (f"; but worse beyond the noise: {first.side_effects_text()}"
                            if first.side_effects_text() else ""))
        named = undecided[:1]
        lines += [f"{s.name} ({s.entrant.outcome}) is {s.gains_text()}" for s in ranked
                  if s.gains and all(s is not n for n in named)]
        return lines

    def limits(self) -> str:
        """The rules' limits, said once for the study rather than with every cell: 'limits: aggregate decode -7%
        (3 cells), cold prefill -10% (1 cell)' ('' where no cell was compared)."""
        cells: dict[tuple[str, str], set[str]] = {}
        for s in self.standings:
            for c in s.entrant.comparisons:
                cells.setdefault((c.rule_words, c.limit()), set()).add(c.cell_id)
        said = [f"{words} {limit} ({len(ids)} cell{'s' if len(ids) != 1 else ''})"
                for (words, limit), ids in cells.items()]
        return ("limits: " + ", ".join(said)) if said else ""

    def side_effects(self) -> list[str]:
        """One line per ranked candidate with a change beyond the noise where no rule looks, in rank order."""
        return [s.side_effects_line() for s in self.standings if not s.entrant.is_baseline and s.entrant.side_effects]


def _passed_over_words(s: Standing) -> str:
    cells = ", ".join(sorted({c.cell_id for c in s.entrant.caveats}))
    codes = sorted({code for c in s.entrant.caveats for code in c.codes})
    return (f"its gains beyond the noise ({cells}) were all measured where " + " and ".join(OUTPUT_WORDS[c] for c in codes)
            + " (gain_on_unrealistic_output), where a drafter guesses right by construction; measure it on output "
              "that does not (real weights, a copy or edit category, unforced lengths) before choosing it")


def _tally(standings: list[Standing]) -> str:
    return counts_text(outcome_counts((s.entrant.outcome, s.entrant.is_baseline) for s in standings))


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def _cell_words(c: Comparison, outcome: str) -> str:
    text = c.text()
    if c.decision in UNDECIDED and outcome != "accepted":
        return f"{text} {decision_words(c, outcome)}"
    if outcome == "accepted":
        return f"nearest its limit: {text}"
    return text


def decision_words(c: Comparison, outcome: str) -> str:
    """What the cell's decision means for the verdict, from its typed decision."""
    if c.decision in UNDECIDED and outcome != "accepted":
        said = {"single": "one run per side, undecided", "missing": "not compared",
                "host": "(a finding about the hosts, not undecided)",
                "insufficient": "undecided, more requests per cell would decide it"}.get(c.decision, "undecided")
        runs = f", about {c.repeats_to_decide} runs per side would likely decide it" \
            if c.repeats_to_decide and c.repeats_to_decide <= 50 else ""
        return f"{said}{runs}"
    if c.decision == "fail":
        return "beyond its limit"
    return "nearest its limit" if outcome == "accepted" else "within its limit"


def _gain(c: Comparison) -> float:
    """A gain's size in its rule's better direction, on the log scale the model compares on."""
    if c.change_pct is None or c.change_pct <= -100:
        return -math.inf
    return math.log1p(c.change_pct / 100.0) * (-1 if c.lower_is_better else 1)


def mean_change(comparisons: list[Comparison]) -> float | None:
    """The geometric mean change over the judged cells, each in its rule's better direction (a fall in TTFT counts
    as a gain), in percent."""
    # a guard judges what must not get worse, not what the study is after: it is no part of the mean change
    logs = [math.log1p(c.change_pct / 100.0) * (-1 if c.metric in LOWER_IS_BETTER else 1)
            for c in comparisons if c.change_pct is not None and c.change_pct > -100 and not c.guard]
    return 100.0 * math.expm1(sum(logs) / len(logs)) if logs else None


def decisive_cells(entrant: Entrant) -> list[Comparison]:
    """The cells that decided the verdict: every cell beyond its limit (worst first) for a rejection, the undecided
    cells nearest to failing for an inconclusive one, the cell nearest its limit for an acceptance."""
    cells = entrant.comparisons
    if entrant.outcome not in ("accepted", "rejected", "inconclusive") or not cells:
        return []
    if entrant.outcome == "accepted":
        cell = deciding(Verdict("accepted", [], cells))
        return [cell] if cell else []
    wanted = ("fail",) if entrant.outcome == "rejected" else UNDECIDED
    pool = [c for c in cells if c.decision in wanted]
    ordered: list[Comparison] = []
    while pool and len(ordered) < SHOWN_CELLS:
        cell = deciding(Verdict(entrant.outcome, [], pool))  # type: ignore[arg-type]
        if cell is None:
            break
        ordered.append(cell)
        pool = [c for c in pool if c is not cell]
    return ordered


def _order(s: Standing) -> tuple:
    """Outcome first; among rejections the fewest cells beyond their limits; then the mean change, best first."""
    failing = sum(1 for c in s.entrant.comparisons if c.decision == "fail")
    mean = s.mean_change_pct if s.mean_change_pct is not None else -math.inf
    return OUTCOME_ORDER.get(s.entrant.outcome, len(OUTCOME_ORDER)), failing, -mean


def answer(study: str, question: str | None, baseline: str, entrants: list[Entrant]) -> Answer:
    """Rank the candidates and recommend one: the best accepted candidate (by the mean change over the judged cells),
    else the baseline when its own runs are sound. The method said is the first entrant's that has one."""
    standings = []
    for e in entrants:
        gains = [c for c in e.comparisons if c.better]
        standings.append(Standing(e, None, mean_change(e.comparisons), decisive_cells(e), gains))
    candidates = sorted((s for s in standings if not s.entrant.is_baseline), key=_order)
    for rank, s in enumerate(candidates, 1):
        s.rank = rank
    base = next((s for s in standings if s.entrant.is_baseline), None)
    accepted = [s for s in candidates if s.entrant.outcome == "accepted"]
    # a candidate whose every gain was earned on looping or forced output is not chosen on that evidence alone
    passed_over = [s for s in accepted if s.entrant.gains_only_on_unrealistic_output]
    eligible = [s for s in accepted if s not in passed_over]
    if eligible:
        chosen: Standing | None = eligible[0]
    else:
        chosen = base if base is not None and base.entrant.outcome == "accepted" else None
    method = next((e.method for e in entrants if e.method), None)
    return Answer(study, question, baseline, ([base] if base else []) + candidates, chosen, method,
                  passed_over=[s for s in passed_over if chosen is None or s.rank is None or chosen.rank is None
                               or s.rank < chosen.rank])


def study_answer(study: Study, judged: list[Judged]) -> Answer:
    """The answer of a study as judge() judged it."""
    rules = study.verdict
    entrants = []
    for item in judged:
        verdict = item.verdict
        entrants.append(Entrant(
            item.entry.name, "missing" if verdict is None else verdict.outcome,
            list(verdict.comparisons) if verdict else [],
            list(verdict.reasons) if verdict else left_out_reasons(item.left_out),
            [r.run_id for r in item.records], item.entry.name == rules.baseline_entry, item.entry.note,
            verdict.method if verdict else None, list(verdict.caveats) if verdict else [],
            verdict.evidence if verdict else None, list(verdict.side_effects) if verdict else [],
            list(verdict.left_out_cells) if verdict else []))
    if rules.baseline_entry is None and rules.baseline_from is not None:  # a baseline of recorded runs
        entrants.insert(0, Entrant(rules.baseline_from.candidate, "accepted", [], ["recorded runs of the journal"],
                                   is_baseline=True))
    return answer(study.name, study.description, rules.baseline, entrants)
