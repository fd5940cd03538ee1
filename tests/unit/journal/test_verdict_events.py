"""Verdict events written before the method had a field of its own load with it as a field, in one place, and a
recorded journal re-judged under the same rules still finds its verdicts unchanged (nothing new is appended)."""

import json
from pathlib import Path

from servebook.config import load_study
from servebook.journal import Journal
from servebook.journal.events import verdict_event
from servebook.verdicts import judge
from tests.helpers.journals import sample_journal

ROOT = Path(__file__).parents[3]
LEGACY = {"outcome": "accepted", "reasons": ["within limits: aggregate decode: ...",
                                             "method: each cell non-inferior at one-sided 5%, ...",
                                             "left out: run r1 decode-c4 (host busy)"]}


def test_a_legacy_event_gives_up_its_method_reason_to_the_field():
    event = verdict_event(LEGACY)
    assert event["method"] == "each cell non-inferior at one-sided 5%, ..."
    assert event["reasons"] == ["within limits: aggregate decode: ...", "left out: run r1 decode-c4 (host busy)"]
    assert LEGACY["reasons"][1].startswith("method: ")  # the event read is a copy: nothing recorded is rewritten


def test_an_event_without_a_method_or_with_the_field_is_left_as_it_is():
    assert verdict_event({"outcome": "failed", "reasons": ["model_load"]}) == {
        "outcome": "failed", "reasons": ["model_load"], "method": None}
    current = {"outcome": "accepted", "reasons": ["method: a reason that only looks like one"], "method": "m"}
    assert verdict_event(current) is current


def test_recorded_verdicts_load_typed_and_a_legacy_copy_of_the_same_verdict_rejudges_unchanged(tmp_path):
    sample_journal(tmp_path, "sample-journal")
    journal = Journal(tmp_path / "journal")
    events = [e for r in journal.runs() for e in r.verdicts()]
    assert events and all("method" in e for e in events) and any(e["method"] for e in events)
    assert not any(r.startswith("method:") for e in events for r in e["reasons"])
    study = load_study(ROOT / "data/studies/h200-1b-llamacpp.yaml")
    judge(study, journal, append=True)
    newest = [max(p.glob("*.json")) for p in (tmp_path / "journal").glob("runs/*/verdicts")]
    for path in newest:  # the same verdicts as an older servebook wrote them: the method as the last reason
        event = json.loads(path.read_text())
        method = event.pop("method", None)
        event["reasons"] += [f"method: {method}"] if method else []
        path.write_text(json.dumps(event))
    before = sorted((tmp_path / "journal").rglob("verdicts/*.json"))
    judged = judge(study, journal, append=True)
    assert all(item.recorded for item in judged if item.verdict is not None)
    assert sorted((tmp_path / "journal").rglob("verdicts/*.json")) == before
