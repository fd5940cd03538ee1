"""One truth across outputs (issue 55): JSON, Markdown, JUnit, `servebook report`, the site's study page and its
downloads (JSON, CSV, JUnit), built from one journal (the committed H200 sample), give the same counts of accepted,
rejected, failed and inconclusive candidates and the same label for each, the baseline labelled "baseline" and
counted apart; a rejection is a JUnit failure whatever `--fail-on` says; no table over runs shows an interval below
zero."""

import csv
import io
import json
import re
from pathlib import Path

import pytest
from junitparser import JUnitXml

from servebook.config import load_study
from servebook.journal import Journal
from servebook.present import build_site
from servebook.present.ci import verdicts_json, verdicts_junit, verdicts_markdown
from servebook.present.report import StudyReport
from servebook.verdicts import gate, judge, parse_fail_on
from servebook.verdicts.ranking import counts_text, study_answer
from tests.helpers.journals import sample_journal

STUDY = Path(__file__).resolve().parents[3] / "data" / "studies" / "h200-1b-llamacpp.yaml"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("truth")
    journal = Journal(sample_journal(tmp))
    study = load_study(STUDY)
    judged = judge(study, journal)  # records the verdicts, as `servebook judge` does, for the site to read
    site = tmp / "site"
    build_site(journal, site)
    return study, judged, site


def junit_labels(xml: str) -> tuple[dict[str, str], dict[str, int], list]:
    """name -> label from each candidate's verdict case, the suite's counts, and every case."""
    cases = [case for suite in JUnitXml.fromstring(xml) for case in suite]
    labels = {}
    for case in cases:
        if case.name != "verdict":
            continue
        result = case.result[0] if case.result else None
        name = case.classname.split(".", 1)[1]
        if result is not None and result._tag == "failure":
            labels[name] = result.type
        elif result is not None:
            labels[name] = result.message.split(": ", 1)[1]
        else:
            labels[name] = "baseline" if (case.system_out or "").startswith("baseline: ") else "accepted"
    suite = next(iter(JUnitXml.fromstring(xml)))
    counts = {p.name: int(p.value) for p in suite.properties()} if suite.properties() else {}
    return labels, counts, cases


def test_every_output_says_the_same_counts_and_labels(built):
    study, judged, site = built
    result = gate(judged, parse_fail_on(None))
    data = json.loads(json.dumps(verdicts_json(study, judged, result), default=str))
    labels = {c["name"]: c["label"] for c in data["candidates"]}
    counts = data["counts"]
    # the demo's study: the baseline, two candidates undecided and three rejected
    assert labels == {"baseline": "baseline", "chunk-512": "inconclusive", "chunk-8192": "rejected",
                      "slots-8": "rejected", "draft-model": "rejected", "ngram": "inconclusive"}
    assert counts == {"inconclusive": 2, "rejected": 3}
    tally = counts_text(counts)

    markdown = verdicts_markdown(study, judged, result)
    assert markdown.splitlines()[0].endswith(f": {tally} (baseline: baseline)")
    rows = dict(re.findall(r"^\| ([\w-]+) \| (\w+) \| \d+ \|", markdown, flags=re.M))
    assert rows == labels  # the verdicts' table
    ranked = dict(re.findall(r"^\| (?:\d+|-) \| \**([\w-]+)\** \| (\w+) \|", markdown, flags=re.M))
    assert ranked == labels  # the answer's ranking, in the same Markdown
    report = str(StudyReport(study_answer(study, judged)))
    assert tally in report and "candidates ranked" in report

    junit, junit_counts, cases = junit_labels(verdicts_junit(study, judged, result))
    assert junit == labels and junit_counts == counts
    # no --fail-on: a cell beyond its limit is still a failure, never skipped
    beyond = [c for c in cases if c.name != "verdict" and c.result and c.result[0]._tag == "failure"]
    assert beyond and all(c.result[0].type == "beyond_limit" for c in beyond)
    assert all(c.classname.split(".", 1)[1] in ("chunk-8192", "slots-8", "draft-model") for c in beyond)

    slug = study.name
    page = (site / "studies" / f"{slug}.html").read_text()
    assert tally in page and "verdict-baseline" in page and ">baseline</span>" in page
    downloaded = json.loads((site / "studies" / f"{slug}-verdicts.json").read_text())
    assert downloaded["counts"] == counts
    assert {c["candidate"]: c["label"] for c in downloaded["candidates"]} == labels
    site_junit, site_counts, _ = junit_labels((site / "studies" / f"{slug}-verdicts.junit.xml").read_text())
    assert site_junit == labels and site_counts == counts
    rows_csv = list(csv.DictReader(io.StringIO((site / "studies" / f"{slug}-verdicts.csv").read_text())))
    assert {r["candidate"]: r["outcome"] for r in rows_csv} == {k: v for k, v in labels.items() if k != "baseline"}


def test_the_study_page_shows_no_interval_below_zero_and_says_how_the_verdict_compares(built):
    study, _, site = built
    page = (site / "studies" / f"{study.name}.html").read_text()
    figures = page[page.index("<h2>Figures per cell</h2>"):page.index("<h2>Charts</h2>")]
    assert "geometric mean of runs" in figures
    assert not re.search(r"\[-\d", figures)  # rates and times: no interval crosses zero
    assert "within the interleaving rounds and machines" in figures and "pooled" in figures
