"""One report for every verdict output (issue 54, item 4): the file `servebook judge --format F --output FILE` writes
for CI and the site's download of the same study are the same bytes, once the journal holds the verdicts the CLI
judged (`judge --record`, as a sweep records them); a format is one module that registers its writer, which the
CLI's `--format` and the study page then offer without another change (shown here with an example format)."""

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servebook.cli import app
from servebook.journal import Journal
from servebook.present import build_site
from servebook.present.outputs import VerdictOutput, VerdictReport, downloads, register_output, unregister_output
from tests.helpers.journals import sample_journal

STUDIES = Path(__file__).resolve().parents[3] / "data" / "studies"
#: the demo's study (rejections, undecided cells, gains) and its capacity study (cells left out as disturbed)
CASES = ["h200-1b-llamacpp", "h200-1b-capacity"]


def names(report: VerdictReport, site_url: str | None = None) -> str:
    """The example format: one line per candidate, its name and its label, tab-separated."""
    return "".join(f"{c.name}\t{c.label}\n" for c in report.candidates)


EXAMPLE = VerdictOutput("names", names, order=60, download="verdicts.names.tsv", title="names (TSV)")


def judge(*args: str) -> None:
    result = CliRunner().invoke(app, ["judge", *args])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def journal_and_site(tmp_path_factory):
    """A sample journal whose verdicts this servebook recorded (the older events taken out, then `judge --record`),
    and its site, built with the example format registered."""
    tmp = tmp_path_factory.mktemp("outputs")
    root = sample_journal(tmp)
    for folder in root.glob("runs/*/verdicts"):
        shutil.rmtree(folder)
    for study in CASES:
        judge(str(STUDIES / f"{study}.yaml"), "--journal", str(root), "--record")
    register_output(EXAMPLE)
    try:
        build_site(Journal(root), tmp / "site")
        yield root, tmp / "site"
    finally:
        unregister_output(EXAMPLE.name)


@pytest.fixture
def example_format():
    register_output(EXAMPLE)
    yield EXAMPLE
    unregister_output(EXAMPLE.name)


@pytest.mark.parametrize("study", CASES)
@pytest.mark.parametrize("fmt", ["json", "junit", "csv", "names"])
def test_the_ci_file_and_the_sites_download_are_the_same_bytes(journal_and_site, example_format, study, fmt, tmp_path):
    root, site = journal_and_site
    judge(str(STUDIES / f"{study}.yaml"), "--journal", str(root), "--format", fmt, "--output", str(tmp_path / "ci"))
    ci = (tmp_path / "ci").read_bytes()
    suffix = next(o.download for o in downloads() if o.name == fmt)
    assert (site / "studies" / f"{study}-{suffix}").read_bytes() == ci
    assert ci.count(b"\n") >= 2  # a header and a candidate or a cell at least, not an empty file


def test_a_registered_format_is_a_choice_of_judge_and_a_download_of_the_study_page(journal_and_site, example_format):
    root, site = journal_and_site
    page = (site / "studies" / "h200-1b-llamacpp.html").read_text()
    assert 'href="h200-1b-llamacpp-verdicts.names.tsv"' in page and "names (TSV)" in page
    result = CliRunner().invoke(app, ["judge", str(STUDIES / "h200-1b-llamacpp.yaml"), "--journal", str(root),
                                      "--format", "names"])
    assert result.exit_code == 0 and "chunk-8192\trejected\n" in result.stdout, result.output
    unregister_output(EXAMPLE.name)
    refused = CliRunner().invoke(app, ["judge", str(STUDIES / "h200-1b-llamacpp.yaml"), "--journal", str(root),
                                       "--format", "names"])
    assert refused.exit_code != 0 and "names" in refused.output


def test_events_recorded_before_the_report_read_as_unknown_not_as_false_and_keep_the_study_order():
    """An event written before verdicts kept `undecided`, `settled` and the study's order reads them as unknown (null
    in the JSON), never as a guess; candidates whose events hold their place come first, in the study's order."""
    from servebook.present.outputs import as_json
    from servebook.present.site.study_downloads import study_report
    from servebook.present.site.summary import RunSummary

    rules = {"baseline": "base"}

    def summary(label, **event):
        return RunSummary(run_id=f"run-{label}", status="completed", label=label, rules=rules,
                          verdicts=[{"outcome": "accepted", "reasons": ["fine"], "run_ids": [f"run-{label}"], **event}])

    report = study_report("s", [summary("old"), summary("second", entry_index=2, undecided=False, settled=True),
                                summary("base", entry_index=0, undecided=False, settled=False)])
    assert [c.name for c in report.candidates] == ["base", "second", "old"]
    data = {c["name"]: c for c in as_json.data(report)["candidates"]}
    assert data["old"]["undecided"] is None and data["old"]["settled"] is None
    assert data["second"]["settled"] is True and data["base"]["label"] == "baseline"
    assert as_json.data(report)["counts"] == {"accepted": 2} and as_json.data(report)["gate"]["fail_on"] == []
