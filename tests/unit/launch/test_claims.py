"""Claims are records (status, value, source): decisions read the status, and the present layer writes the words.
Runs recorded before claims were typed hold one sentence per claim; they load as the same records."""

import json
from pathlib import Path

import pytest

from servebook.config.claims import Claim, Verification
from servebook.journal import samples
from servebook.present.claims import claim_text
from servebook.present.tables import verification_table

ROOT = Path(__file__).parents[3]
SENTENCES = [
    ("verified: 32", Claim(status="verified", value="32", source="self_report")),
    ("verified: 16384 per slot", Claim(status="verified", value="16384 per slot", source="self_report")),
    ("contradicted: server reports /m/other", Claim(status="contradicted", value="/m/other", source="self_report")),
    ("claimed, not verified", Claim(status="not_verified")),
    ("claimed, not verified (auto; the server resolved it to fp8_e4m3)",
     Claim(status="not_verified", value="fp8_e4m3", source="self_report", resolved_auto=True)),
    ("set on the command line: -b 512 -ub 512 (the server does not report it)",
     Claim(status="on_command_line", value="-b 512 -ub 512", source="command_line")),
    ("verified: 8; the scheduler runs at most 4 at once",
     Claim(status="verified", value="8", source="self_report", scheduler_limit=4)),
]


@pytest.mark.parametrize(("text", "claim"), SENTENCES)
def test_an_old_sentence_loads_as_its_record_and_is_written_back_the_same(text, claim):
    assert Claim.from_legacy(text) == claim
    assert claim_text(claim) == text


def test_an_unknown_old_sentence_is_kept_as_written_and_not_taken_for_checked():
    claim = Verification.model_validate({"claims": {"model": "checked by hand"}}).claims["model"]
    assert claim.status == "not_verified" and not claim.checked and claim_text(claim) == "checked by hand"


def test_the_table_marks_what_nothing_confirms_from_the_status():
    table = verification_table({"claims": {"knobs.chunk_size": {"status": "not_verified"},
                                           "knobs.max_running_requests": {"status": "verified", "value": 4}}})
    assert [row.values for row in table.rows] == [["knobs.chunk_size", "claimed, not verified"],
                                              ["knobs.max_running_requests", "verified: 4"]]
    assert [row.css for row in table.rows] == ["warn", ""]


def test_every_recorded_claim_loads_typed_and_reads_as_it_was_recorded():
    seen = 0
    for path in sorted(samples.samples_root().glob("sample-journal*/runs/*/manifest.json")):
        recorded = ((json.loads(path.read_text()).get("engine") or {}).get("verification") or {}).get("claims") or {}
        loaded = Verification.model_validate({"claims": recorded}).claims
        for name, text in recorded.items():
            if isinstance(text, dict):  # written as a Claim record: it loads as recorded
                assert (loaded[name].status, loaded[name].value) == (text["status"], text.get("value"))
                assert loaded[name].legacy_text is None and claim_text(loaded[name])
                seen += 1
                continue
            assert loaded[name].legacy_text is None, text  # every recorded sentence is one of the known forms
            assert claim_text(loaded[name]) == text
            seen += 1
    assert seen > 100
