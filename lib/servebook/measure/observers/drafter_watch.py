"""A drafter that drafts nothing: the engine did not run the candidate as stated, and the run fails as soon as it
shows, not at the plan's end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ...engines import EngineFailed
from ...util.files import tail_of
from ..log import MeasurementLog
from ..roles import MeasuredEngine

__all__ = ["drafter_watch", "inactive_drafter"]


def drafter_watch(drafter: str, adapter: MeasuredEngine, log: MeasurementLog, engine_log: Path,
                  after_tokens: int = 64) -> Callable[[], None]:
    """A check to call after each cell: once `after_tokens` tokens were decoded, a drafter that drafted none fails
    the run there, not minutes later at the plan's end (it will not start later: llama.cpp logs the drafter it could
    not load at start and serves on without it). A working random draft drafted 174 tokens for the demo's first 128."""
    checked = False

    def check() -> None:
        nonlocal checked
        if checked:
            return
        decoded = sum(max(0, (o.summary.get("completion_tokens") or 0) - len(o.records)) for o in log.outcomes)
        if decoded >= after_tokens:
            checked = True
            inactive_drafter(drafter, adapter, log, engine_log)

    return check


def inactive_drafter(drafter: str, adapter: MeasuredEngine, log: MeasurementLog, engine_log: Path) -> None:
    """Raise when a configured drafter never drafted: the engine did not run the candidate as stated
    (llama.cpp, for one, logs a drafter it cannot load and serves on without it)."""
    # An n-gram drafter legitimately drafts nothing when the output never repeats itself.
    if drafter in ("none", "ngram") or not log.outcomes:
        return
    counts = adapter.server_counts(log.outcomes[0].before, log.outcomes[-1].after)
    if counts is None or counts.drafted is None or counts.drafted > 0:
        return
    errors = adapter.error_lines(engine_log.read_text(errors="replace")[-4_000_000:])
    hint = next((line for line in errors if "spec" in line.lower() or "draft" in line.lower()), None)
    requests = sum(len(o.records) for o in log.outcomes)
    message = f"drafter {drafter} configured, but the engine drafted no tokens in {requests} requests"
    raise EngineFailed("drafter_inactive", message + (f"; engine log: {hint}" if hint else ""),
                       log_tail=tail_of(engine_log), stage="measure")
