"""A study page's verdicts as files: JSON, CSV and JUnit XML from the recorded verdict events the page shows."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from xml.etree import ElementTree

from servebook.journal import Journal
from servebook.present.site.builder import build_site
from tests.helpers.journals import sample_journal

ROOT = Path(__file__).resolve().parents[3]


def test_the_study_page_links_its_verdicts_as_json_csv_and_junit(tmp_path):
    sample_journal(tmp_path, "sample-journal-vllm-resident")
    build_site(Journal(tmp_path / "journal"), tmp_path / "site")
    studies = tmp_path / "site" / "studies"
    stem = "h200-vllm-1b-resident-pilot"
    page = (studies / f"{stem}.html").read_text()
    for suffix in ("verdicts.json", "verdicts.csv", "verdicts.junit.xml"):
        assert f'href="{stem}-{suffix}"' in page and (studies / f"{stem}-{suffix}").is_file()
    verdicts = {c["name"]: c for c in json.loads((studies / f"{stem}-verdicts.json").read_text())["candidates"]}
    assert verdicts["chunk-2048"]["outcome"] == "rejected" and verdicts["baseline"]["outcome"] == "accepted"
    rows = list(csv.DictReader(io.StringIO((studies / f"{stem}-verdicts.csv").read_text())))
    cells = {(r["candidate"], r["cell_id"]): r for r in rows}
    prefill = cells[("chunk-2048", "prefill-8192")]
    assert prefill["decision"] == "fail" and float(prefill["decision_high_pct"] or prefill["change_high_pct"]) < -10
    assert {r["candidate"] for r in rows} == {"chunk-2048", "kv-fp8", "no-prefix-cache"}
    suite = ElementTree.fromstring((studies / f"{stem}-verdicts.junit.xml").read_text()).find("testsuite")
    assert suite is not None
    # per candidate its verdict's case (one rejected, two undecided) and a case per judged cell, as the CI file has
    verdict = {case.get("classname"): [r.tag for r in case if r.tag in ("failure", "skipped")]
               for case in suite.iter("testcase") if case.get("name") == "verdict"}
    assert sorted(tags[0] for tags in verdict.values() if tags) == ["failure", "skipped", "skipped"]
    beyond = [case for case in suite.iter("testcase") if case.find("failure") is not None and case.get("name") != "verdict"]
    assert beyond and all(case.find("failure").get("type") == "beyond_limit" for case in beyond)
