"""Verdict events written before the method, and the cells left out as disturbed, had fields of their own load with
them as fields, in one place, and a recorded journal re-judged under the same rules still finds its verdicts unchanged
(nothing new is appended)."""

import json
from pathlib import Path

from servebook.config import load_study
from servebook.journal import Journal
from servebook.journal.events import verdict_event
from servebook.verdicts import judge
from tests.helpers.journals import sample_journal

ROOT = Path(__file__).parents[3]
LEGACY = {"outcome": "accepted", "reasons": [
    "within limits: aggregate decode: ...", "method: each cell non-inferior at one-sided 5%, ...",
    "left out: run r1 decode-c4 (host busy: other processes used 0.70 CPU cores during the cell (limit 0.5))"]}


def test_a_legacy_event_gives_up_its_method_and_left_out_reasons_to_their_fields():
    event = verdict_event(LEGACY)
    assert event["method"] == "each cell non-inferior at one-sided 5%, ..."
    assert event["reasons"] == ["within limits: aggregate decode: ..."]
    assert event["left_out_cells"] == [{"run_id": "r1", "cell_id": "decode-c4", "codes": ["host_busy"]}]
    assert LEGACY["reasons"][1].startswith("method: ")  # the event read is a copy: nothing recorded is rewritten


def test_a_legacy_left_out_cell_is_read_for_its_codes_and_a_damaged_run_stays_a_reason():
    damaged = "left out: run r2 damaged (unreadable_table): cells.parquet not a parquet file (truncated)"
    lag = ("left out: run r3 capacity-32rps (the client sent 12 of 108 requests more than 50 ms after they were due "
           "(worst 94 ms): it fell behind its schedule, so the load was not the one asked for)")
    both = ("left out: run r4 decode-prose-c1 (host busy: other processes used 0.60 CPU cores during the cell (limit "
            "0.5); client stalled: 2 of 4 requests read tokens faster than 2x the engine's rate (r1: 31 in 4 ms))")
    event = verdict_event({"outcome": "accepted", "reasons": ["baseline of the study", damaged, lag, both],
                           "method": None})
    assert event["reasons"] == ["baseline of the study", damaged]
    assert [(c["run_id"], c["cell_id"], c["codes"]) for c in event["left_out_cells"]] == [
        ("r3", "capacity-32rps", ["client_lag"]), ("r4", "decode-prose-c1", ["host_busy", "client_stall"])]


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


def test_a_legacy_copy_of_verdicts_with_cells_left_out_rejudges_unchanged(tmp_path):
    """The capacity study's baseline and candidate each leave out probes whose client fell behind: written as an older
    servebook wrote them (a reason per cell, quoting its fault text), they read back as the same typed cells."""
    sample_journal(tmp_path, "sample-journal")
    journal = Journal(tmp_path / "journal")
    study = load_study(ROOT / "data/studies/h200-1b-capacity.yaml")
    judge(study, journal, append=True)
    newest = [max(p.glob("*.json")) for p in (tmp_path / "journal").glob("runs/*/verdicts")]
    rewritten = 0
    for path in newest:
        event = json.loads(path.read_text())
        cells = event.pop("left_out_cells", [])
        texts = {}
        for cell in cells:  # the text the cell recorded beside its codes, as the older reason quoted it
            rows = journal.run(cell["run_id"]).table("cells")
            texts[cell["cell_id"], cell["run_id"]] = rows.set_index("cell_id").loc[cell["cell_id"], "invalid_reasons"]
        event["reasons"] += [f"left out: run {c['run_id']} {c['cell_id']} ({texts[c['cell_id'], c['run_id']]})"
                             for c in cells]
        rewritten += bool(cells)
        path.write_text(json.dumps(event))
    assert rewritten >= 2
    before = sorted((tmp_path / "journal").rglob("verdicts/*.json"))
    judged = judge(study, journal, append=True)
    assert all(item.recorded for item in judged if item.verdict is not None)
    assert sorted((tmp_path / "journal").rglob("verdicts/*.json")) == before
