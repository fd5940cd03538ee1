"""One truth across outputs (issue 55): JSON, Markdown, JUnit, `servebook report`, the site's study page and its
downloads (JSON, CSV, JUnit), built from one journal (the committed H200 sample), give the same counts of accepted,
rejected, failed and inconclusive candidates and the same label for each, the baseline labelled "baseline" and
counted apart; a rejection is a JUnit failure whatever `--fail-on` says; no table over runs shows an interval below
zero; each candidate is one line (its verdict, deciding cell, best gain, worst side effect and the cells left out)
that `report`, the Markdown and the site say alike, with the limits and the method said once per study."""

import csv
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from junitparser import JUnitXml

from servebook.config import load_study
from servebook.journal import Journal
from servebook.present import build_site
from servebook.present.outputs import as_json, as_junit, as_markdown, report_of_judged
from servebook.present.report import StudyReport
from servebook.util.render import to_plain
from servebook.verdicts import gate, judge, parse_fail_on
from servebook.verdicts.labels import counts_text
from servebook.verdicts.ranking import study_answer
from tests.helpers.journals import sample_journal

STUDIES = Path(__file__).resolve().parents[3] / "data" / "studies"
STUDY = STUDIES / "h200-1b-llamacpp.yaml"
#: the same journal's capacity study, whose probes left out as disturbed (the client behind its schedule) are counted
CAPACITY = STUDIES / "h200-1b-capacity.yaml"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("truth")
    journal = Journal(sample_journal(tmp))
    study = load_study(STUDY)
    judged = judge(study, journal)  # records the verdicts, as `servebook judge` does, for the site to read
    capacity = load_study(CAPACITY)
    capacity_judged = judge(capacity, journal)
    site = tmp / "site"
    build_site(journal, site)
    return study, judged, site, (capacity, capacity_judged)


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
    study, judged, site, _ = built
    result = gate(judged, parse_fail_on(None))
    data = json.loads(json.dumps(as_json.data(report_of_judged(study, judged, result)), default=str))
    labels = {c["name"]: c["label"] for c in data["candidates"]}
    counts = data["counts"]
    # the demo's study: the baseline, two candidates undecided and three rejected
    assert labels == {"baseline": "baseline", "chunk-512": "inconclusive", "chunk-8192": "rejected",
                      "slots-8": "rejected", "draft-model": "rejected", "ngram": "inconclusive"}
    assert counts == {"inconclusive": 2, "rejected": 3}
    tally = counts_text(counts)

    markdown = as_markdown.write(report_of_judged(study, judged, result))
    assert markdown.splitlines()[0].endswith(f": {tally} (baseline: baseline)")
    ranked = dict(re.findall(r"^\| (?:\d+|-) \| \**([\w-]+)\** \| (\w+) \|", markdown, flags=re.M))
    assert ranked == labels  # the answer's ranking is the Markdown's one table of verdicts
    report = str(StudyReport(study_answer(study, judged)))
    assert tally in report and "candidates ranked" in report

    junit, junit_counts, cases = junit_labels(as_junit.write(report_of_judged(study, judged, result)))
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
    assert {c["name"]: c["label"] for c in downloaded["candidates"]} == labels
    site_junit, site_counts, _ = junit_labels((site / "studies" / f"{slug}-verdicts.junit.xml").read_text())
    assert site_junit == labels and site_counts == counts
    rows_csv = list(csv.DictReader(io.StringIO((site / "studies" / f"{slug}-verdicts.csv").read_text())))
    assert {r["candidate"]: r["outcome"] for r in rows_csv} == {k: v for k, v in labels.items() if k != "baseline"}


def test_the_study_page_shows_no_interval_below_zero_and_says_how_the_verdict_compares(built):
    study, _, site, _ = built
    page = (site / "studies" / f"{study.name}.html").read_text()
    figures = page[page.index("<h2>Figures per cell</h2>"):page.index("<h2>Charts</h2>")]
    assert "geometric mean of runs" in figures
    assert not re.search(r"\[-\d", figures)  # rates and times: no interval crosses zero
    assert "within the interleaving rounds and machines" in figures and "pooled" in figures


class _Tables(HTMLParser):
    """Every table of a page as rows of cell texts (the header row first), entities read back."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.tables[-1][-1].append(" ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def site_ranking(page: str) -> dict[str, dict[str, str]]:
    """candidate -> column -> text of the answer's ranking, the first table of the study page."""
    found = _Tables()
    found.feed(page[page.index('<section class="answer"'):])
    header, *rows = found.tables[0]
    return {row[1]: dict(zip(header, row, strict=True)) for row in rows}


def markdown_ranking(markdown: str) -> dict[str, dict[str, str]]:
    lines = [line for line in markdown.splitlines() if line.startswith("| ")]
    header = [v.strip() for v in lines[0].strip("|").split("|")]
    rows = [[v.strip() for v in line.strip("|").split("|")] for line in lines[1:]]
    return {row[1].strip("*"): dict(zip(header, row, strict=True)) for row in rows}


@pytest.mark.parametrize("which", ["decode", "capacity"])
def test_each_candidate_is_one_line_that_report_markdown_and_site_say_alike(built, which):
    """Issue 55, item 5: per candidate one line (verdict, deciding cell, best gain, worst side effect, the cells left
    out as one count), the same fields in `report`, the Markdown summary, the site's ranking and the JSON; the
    limits and the method said once per study, no cell repeating Holm's rule; cells left out folded into a count
    whose runs the site links, not a reason per cell (the capacity study leaves out probes on both sides)."""
    study, judged, site, capacity = built
    if which == "capacity":
        study, judged = capacity
    answer = study_answer(study, judged)
    report = to_plain(StudyReport(answer).blocks())
    markdown = as_markdown.write(report_of_judged(study, judged, gate(judged, parse_fail_on(None))))
    page = (site / "studies" / f"{study.name}.html").read_text()
    data = {c["name"]: c for c in as_json.data(report_of_judged(study, judged, gate(judged, parse_fail_on(None))))["candidates"]}
    tables = {"markdown": markdown_ranking(markdown), "site": site_ranking(page)}
    for s in answer.standings:
        said = {"verdict": s.outcome, "deciding cell": s.deciding_text(), "best gain": s.best_gain_text(),
                "worst side effect": s.worst_side_effect_text(),
                "left out": f"{s.left_out.count()}: {s.left_out.why()}" if s.left_out else "-"}
        assert s.line() in report.splitlines()  # one line, unwrapped where the terminal does not wrap it
        assert all(text == "-" or text in s.line() for column, text in said.items() if column != "left out")
        for where, rows in tables.items():
            row = rows[s.name]
            for column, text in said.items():  # a column is left out only where no candidate fills it
                assert row.get(column, "-") == text.replace("|", "/"), (where, s.name, column)
        typed = data[s.name]
        assert (typed["deciding_cell"] or {}).get("cell_id") == (s.deciding.cell_id if s.deciding else None)
        assert len(typed.get("left_out_cells", [])) == len(s.left_out.cells)
    base = answer.standings[0]
    assert base.entrant.is_baseline and base.line().startswith(f"- {base.name}: baseline, ")
    assert tables["site"][base.name]["verdict"] == tables["markdown"][base.name]["verdict"] == "baseline"
    for text in (report, markdown, page):
        assert text.count("method: ") == 1 and "Holm over" not in text and "left out: run" not in text
    assert report.count(answer.limits()) == markdown.count(answer.limits()) == 1
    folded = [s for s in answer.standings if s.left_out]
    assert bool(folded) == (which == "capacity")
    for s in folded:  # one count per candidate, each of its runs linked to its page
        item = page[page.index(f"<li class=\"left-out\">{s.left_out.text()}"):]
        item = item[:item.index("</li>")]
        assert all(f'<a href="../runs/{run}.html">' in item for run in s.left_out.runs)
        assert report.count(s.left_out.text()) == 1
