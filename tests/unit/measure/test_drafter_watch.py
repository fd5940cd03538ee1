"""A drafter that drafted nothing fails the run once tokens were decoded, not at the plan's end."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from servebook.measure.log import CellOutcome, MeasurementLog
from servebook.measure.observers.drafter_watch import drafter_watch
from servebook.util.errors import EngineFailed


class Engine:
    def __init__(self, drafted: int):
        self.drafted = drafted

    def server_counts(self, before, after):
        return SimpleNamespace(drafted=self.drafted)

    def error_lines(self, text: str) -> list[str]:
        return [line for line in text.splitlines() if " E " in line]


def cell(log: MeasurementLog, requests: int, completion_tokens: int) -> None:
    log.outcomes.append(CellOutcome(None, [None] * requests, None, None,  # type: ignore[arg-type]
                                    {"completion_tokens": completion_tokens}))


def test_a_drafter_that_drafted_nothing_fails_after_the_first_decoded_tokens(tmp_path):
    engine_log = tmp_path / "engine.log"
    engine_log.write_text("0.01.550 E srv load_model: failed to initialize speculative decoding context\n")
    log = MeasurementLog()
    watch = drafter_watch("eagle3", Engine(drafted=0), log, engine_log)
    cell(log, requests=4, completion_tokens=4)  # a prefill cell: one token per request, nothing to draft
    watch()
    cell(log, requests=2, completion_tokens=128)
    with pytest.raises(EngineFailed) as failed:
        watch()
    assert failed.value.cause == "drafter_inactive" and "speculative decoding context" in str(failed.value)


def test_a_drafter_that_drafts_is_checked_once_and_an_ngram_never(tmp_path):
    log = MeasurementLog()
    engine = Engine(drafted=174)
    watch = drafter_watch("draft_model", engine, log, tmp_path / "engine.log")
    cell(log, requests=2, completion_tokens=128)
    watch()
    engine.drafted = 0  # checked once: later cells are the end-of-plan check's
    watch()
    ngram = drafter_watch("ngram", Engine(drafted=0), log, tmp_path / "engine.log")
    ngram()
