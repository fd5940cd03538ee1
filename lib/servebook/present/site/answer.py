"""What the site reads from recorded verdicts: a study's answer (the same `Answer` as `servebook report`), and
which verdict covers each run, the newest one compared, not only the one it was recorded on."""

from __future__ import annotations

from typing import Any

from ...util.render import Table
from ...verdicts.labels import outcome_label
from ...verdicts.left_out import left_out_cell_from
from ...verdicts.output import caveat_from
from ...verdicts.ranking import Answer, Entrant, answer, comparison_from
from ...verdicts.side_effects import side_effect_from
from ..report import SIDE_EFFECTS, ranking_row, ranking_table
from .summary import RunSummary


def _event(s: RunSummary) -> dict:
    return s.verdicts[-1] if s.verdicts else {}


def study_answer_of(name: str, chosen: list[RunSummary], rules: dict | None) -> Answer | None:
    """The answer from each candidate's newest verdict (`chosen`: one summary per candidate); None when no verdict
    was recorded yet."""
    if not rules or not any(s.verdicts for s in chosen):
        return None
    entrants = []
    for s in chosen:
        event = _event(s)
        outcome = event.get("outcome") or ("failed" if s.status == "failed" else "missing")
        entrants.append(Entrant(
            s.label, outcome, [comparison_from(c) for c in event.get("comparisons") or [] if "decision" in c],
            list(event.get("reasons") or []), list(event.get("run_ids") or [s.run_id]),
            s.label == rules.get("baseline"), event.get("note"), event.get("method"),
            [caveat_from(c) for c in event.get("caveats") or []], event.get("evidence"),
            [side_effect_from(e) for e in event.get("side_effects") or []],
            [left_out_cell_from(c) for c in event.get("left_out_cells") or []]))
    question = next((_event(s).get("question") for s in chosen if _event(s).get("question")), None)
    return answer(name, question, str(rules.get("baseline")), entrants)


def shown_verdict(s: RunSummary, rules: dict | None) -> str | None:
    """A candidate's verdict as the study page labels it, as every output does: the baseline's acceptance reads
    "baseline" (verdicts.ranking.outcome_label); None where it was never judged."""
    return outcome_label(s.verdict, s.label == (rules or {}).get("baseline")) if s.verdict else None


def answer_context(found: Answer | None) -> dict[str, Any] | None:
    """What the study template draws of the answer: the same sentences and ranking as the terminal."""
    if found is None:
        return None
    table: Table = ranking_table(found)
    return {"question": (found.question or "").strip() or None, "headline": found.headline(), "why": found.why(),
            "recommended": found.recommended.name if found.recommended else None,
            "ranking": table, "side_effects": found.side_effects(), "side_effects_said": SIDE_EFFECTS,
            "method": f"method: {found.method}" if found.method else None, "rows": [ranking_row(s) for s in found.standings]}


def covering_verdicts(summaries: list[RunSummary]) -> None:
    """Mark each run that holds no verdict of its own with the newest verdict that compared it (a verdict is
    recorded on a candidate's newest run and lists every run it judged), in place: `verdict` and `judged_on`."""
    newest: dict[str, tuple[str, str, str]] = {}
    for s in summaries:
        for event in s.verdicts:
            stamp = str(event.get("judged_at") or "")
            for run_id in event.get("run_ids") or []:
                if run_id not in newest or stamp >= newest[run_id][0]:
                    newest[run_id] = (stamp, str(event.get("outcome") or ""), s.run_id)
    for s in summaries:
        s.judged_on = None
        found = newest.get(s.run_id)
        if s.verdict is None and found is not None and found[2] != s.run_id:
            s.verdict, s.judged_on = found[1] or None, found[2]


def every_run(runs: list[RunSummary], label: str, judged: list[RunSummary]) -> list[dict]:
    """Every run of a candidate in the study, oldest first, each marked with whether its verdict compared it."""
    compared = {s.run_id for s in judged}
    return [{"run_id": s.run_id, "status": s.status, "compared": s.run_id in compared}
            for s in runs if s.label == label]
