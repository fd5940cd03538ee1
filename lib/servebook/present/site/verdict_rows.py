"""The study page's verdicts table: a row per candidate with its runs, its verdict and what a reader needs beside the
ranking above it. Said there once, not here: the method (a candidate's only where it differs from the study's) and
the limits (the rules line). The cells left out as disturbed are one count with their runs linked; the judged cells
are a table of the numbers that change from cell to cell, folded with the verdict's reasons."""

from __future__ import annotations

from typing import Any

from ...util.render import Table
from ...verdicts.left_out import LeftOut
from ...verdicts.ranking import comparison_from, decision_words
from .answer import every_run, shown_verdict
from .identities import stale_verdicts
from .pages import status_reason
from .summary import RunSummary

#: the judged cells' table: what changes from cell to cell, nothing that does not
CELL_COLUMNS = ["cell", "change [interval]", "limit", "decision"]


def cells_table(event: dict[str, Any]) -> Table | None:
    """Each judged cell of a verdict event in one row (None where it compared none)."""
    cells = [comparison_from(c) for c in event.get("comparisons") or [] if "decision" in c]
    if not cells:
        return None
    outcome = str(event.get("outcome") or "")
    table = Table(CELL_COLUMNS)
    for c in cells:
        table.add([c.name, c.figure(), c.limit(), decision_words(c, outcome)],
                  "warn" if c.decision == "fail" else "")
    return table


def verdict_rows(groups: dict[str, list[RunSummary]], runs: list[RunSummary], rules: dict | None,
                 method: str | None, histories: dict) -> list[dict[str, Any]]:
    """One row per candidate for the study template: `groups`, each candidate's judged runs (newest last); `runs`,
    every run of the study; `method`, the study's (said once above the table)."""
    stale = stale_verdicts(runs, (rules or {}).get("baseline"))
    rows = []
    for label, group in groups.items():
        newest = group[-1]
        event = newest.latest_verdict
        left_out = LeftOut.of(event.get("left_out_cells"))
        cells = cells_table(event)
        rows.append({
            "label": label, "run_id": newest.run_id,
            "history": histories.get((newest.plan_id or "", label), (None,))[0],
            "runs": len(group), "every_run": every_run(runs, label, group), "stale": stale.get(label),
            "status": newest.status, "verdict": shown_verdict(newest, rules),
            "reasons": newest.reasons or status_reason(newest),
            "method": newest.method if newest.method != method else None,
            "left_out": {"text": left_out.text(), "runs": left_out.runs} if left_out else None,
            "cells": cells, "cells_said": f"its {len(cells.rows)} judged cell{'s' if len(cells.rows) != 1 else ''} "
                                          "and the verdict's reasons" if cells else None})
    return rows
