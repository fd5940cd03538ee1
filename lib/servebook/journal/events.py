"""Verdict events as read back: one shape whichever servebook wrote them; and the event files of a folder.

A verdict event's `method` (what decided it: the test, its level, where the variance came from) is a field of
its own. Events written before it was carried the method as a reason that started with "method: ". They are
upgraded here, once, as they are read, so that nothing downstream ever looks at a reason's wording. So are the
cells left out as disturbed (`left_out_cells`: run, cell and fault codes each), which such events named one reason
per cell ("left out: run R CELL (why)").
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..measure.validity import codes_of

#: how events written before the `method` field held the method: the one reason starting with these words
_LEGACY_METHOD = "method: "
#: how events written before `left_out_cells` named each cell left out as disturbed: its fault texts in brackets,
#: which close at the end (a damaged run's "left out: run R damaged (code): file ..." is no cell's)
_NESTED = r"(?:[^()]|\((?:[^()]|\([^()]*\))*\))*"
_LEGACY_LEFT_OUT = re.compile(rf"left out: run (?P<run>\S+) (?P<cell>[\w.-]+) \((?P<why>{_NESTED})\)", re.DOTALL)


def verdict_event(event: dict[str, Any]) -> dict[str, Any]:
    """The event with `method` and `left_out_cells` as fields; the legacy reasons that held them are taken out of
    `reasons`. An event that has the fields already is returned unchanged (the recorded file is never rewritten)."""
    return _left_out_cells(_method(event))


def _left_out_cells(event: dict[str, Any]) -> dict[str, Any]:
    reasons = event.get("reasons")
    if "left_out_cells" in event or not isinstance(reasons, list):
        return event
    found = [(r, _LEGACY_LEFT_OUT.fullmatch(r) if isinstance(r, str) else None) for r in reasons]
    cells = [{"run_id": m["run"], "cell_id": m["cell"], "codes": codes_of(None, m["why"])} for _, m in found if m]
    if not cells:
        return event
    return {**event, "reasons": [r for r, m in found if m is None], "left_out_cells": cells}


def _method(event: dict[str, Any]) -> dict[str, Any]:
    if "method" in event:
        return event
    reasons = event.get("reasons")
    if not isinstance(reasons, list):
        return {**event, "method": None}
    legacy = [r for r in reasons if isinstance(r, str) and r.startswith(_LEGACY_METHOD)]
    kept = [r for r in reasons if not (isinstance(r, str) and r.startswith(_LEGACY_METHOD))]
    return {**event, "reasons": kept, "method": legacy[0][len(_LEGACY_METHOD):] if legacy else None}


def event_names(folder: str) -> list[str]:
    """The event files of a verdicts or annotations folder, in the order they were written (their names sort so);
    none where the folder is not there. os.scandir, as pathlib's glob costs several times more per run read."""
    try:
        with os.scandir(folder) as entries:
            return sorted(e.name for e in entries if e.name.endswith(".json") and not e.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []
