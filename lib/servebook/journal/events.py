"""Verdict events as read back: one shape whichever servebook wrote them; and the event files of a folder.

A verdict event's `method` (what decided it: the test, its level, where the variance came from) is a field of
its own. Events written before it was carried the method as a reason that started with "method: ". They are
upgraded here, once, as they are read, so that nothing downstream ever looks at a reason's wording.
"""

from __future__ import annotations

import os
from typing import Any

#: how events written before the `method` field held the method: the one reason starting with these words
_LEGACY_METHOD = "method: "


def verdict_event(event: dict[str, Any]) -> dict[str, Any]:
    """The event with `method` as a field; the legacy reason that held it is taken out of `reasons`. An event that
    has the field already is returned unchanged (the recorded file itself is never rewritten)."""
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
