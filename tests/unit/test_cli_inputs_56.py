"""The CLI parts of issue 56, item 12: each input refused or said in one line, and nothing to judge or to choose
never passed off as a result with exit 0."""

import shutil
import textwrap

import pytest
from typer.testing import CliRunner

from servebook.cli import app
from servebook.config import InputError, load_study
from servebook.journal import Journal, samples
from servebook.sweeps import search
from servebook.sweeps.runner import ModelledRunner
from servebook.util.paths import project_root
from servebook.util.progress import Reporter

ROOT = project_root()
SAMPLE = samples.sample_journal("sample-journal")
SAMPLE_STUDY = ROOT / "data" / "studies" / "h200-1b-llamacpp.yaml"
SEARCH = ROOT / "data" / "studies" / "search-sim.yaml"


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def one_line_error(result, code=2):
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.output


def test_fail_on_naming_no_outcome_is_refused_before_judging(tmp_path):
    shutil.copytree(SAMPLE, tmp_path / "journal")
    result = invoke("judge", SAMPLE_STUDY, "--journal", tmp_path / "journal", "--fail-on", "")
    assert "--fail-on '': names no outcome" in one_line_error(result)


def test_output_with_the_text_format_writes_the_tables(tmp_path):
    shutil.copytree(SAMPLE, tmp_path / "journal")
    written = tmp_path / "verdicts.txt"
    result = invoke("judge", SAMPLE_STUDY, "--journal", tmp_path / "journal", "--output", written)
    assert result.exit_code == 0, result.output
    assert "text verdicts written to" in result.output
    text = written.read_text()
    assert "\x1b[" not in text and any(entry.name in text for entry in load_study(SAMPLE_STUDY).expand())


@pytest.mark.parametrize("limit", ["-5", "nan", "inf"])
def test_a_compare_limit_that_is_no_percentage_is_one_line_naming_the_option(tmp_path, limit):
    result = invoke("compare", "--a", "candidate=baseline,study=h200-1b-llamacpp", "--b",
                    "candidate=chunk-512,study=h200-1b-llamacpp", "--journal", SAMPLE,
                    "--limit", limit)
    output = one_line_error(result)
    assert "--limit" in output and "Traceback" not in output and "validation error" not in output


def test_compare_with_rules_that_select_no_cell_says_so_and_fails(tmp_path):
    """The sample journal measured prose only: a rule on code cells selects none of its cells."""
    text = SAMPLE_STUDY.read_text().replace("categories: [prose]", "categories: [prose, code]")
    text = text[:text.index("  rules:")] + "  rules:\n    - {metric: aggregate_tok_s, concurrency: [4], category: code, " \
                                           "max_regression_pct: 5}\n"
    study = tmp_path / "study.yaml"
    study.write_text(text)
    result = invoke("compare", "--a", "candidate=baseline,study=h200-1b-llamacpp", "--b",
                    "candidate=chunk-512,study=h200-1b-llamacpp", "--journal", SAMPLE,
                    "--study", study)
    assert "no cell of the rules (aggregate_tok_s) was measured validly in both slices" in one_line_error(result)


def search_study(tmp_path, space: str):
    text = SEARCH.read_text()
    start, end = text.index("  space:\n"), text.index("  objective:")
    path = tmp_path / "search.yaml"
    path.write_text(text[:start] + "  space:\n" + textwrap.indent(textwrap.dedent(space), "    ") + text[end:])
    return path


@pytest.mark.parametrize("space, refusal", [
    ("name: [a, b]\nknobs.kv_dtype: [auto, fp8_e4m3]\n", r"search.space: .*name: not part of a candidate's identity"),
    # a knob outside the identity is refused before any launch
    ("launch.ready_timeout_s: [30, 60]\nknobs.kv_dtype: [auto, fp8_e4m3]\n",
     r"launch.ready_timeout_s: not part of a candidate's identity"),
    ("knobs.kv_dtype: [auto]\n", r"one configuration, nothing to choose between"),
])
def test_a_search_space_that_chooses_nothing_is_refused(tmp_path, space, refusal):
    with pytest.raises(InputError, match=refusal):
        load_study(search_study(tmp_path, space))


def test_a_space_of_which_one_configuration_fits_names_it_without_a_launch(tmp_path):
    path = search_study(tmp_path, "knobs.max_running_requests: [8, 4096]\n")
    runner = ModelledRunner()
    result = search(load_study(path), Journal(tmp_path / "j"), runner=runner, reporter=Reporter(quiet=True))
    assert runner.launches == [] and result.winner is not None and "nothing was launched" in result.decision


def test_a_space_whose_configurations_all_fail_says_why_field_by_field_and_exits_1(tmp_path):
    path = search_study(tmp_path, "knobs.max_running_requests: [4096, 8192]\n")
    result = invoke("search", path, "--journal", tmp_path / "j")
    assert result.exit_code == 1, result.output
    assert "no winner: every configuration was pruned" in result.output
    assert ": :" not in result.output


def test_an_invalid_configuration_is_pruned_with_its_field_named_on_one_line(tmp_path):
    path = search_study(tmp_path, "knobs.max_running_requests: [0, -1]\n")
    result = search(load_study(path), Journal(tmp_path / "j"), runner=ModelledRunner(), reporter=Reporter(quiet=True))
    reasons = [p.reason for p in result.pruned]
    assert len(reasons) == 2 and all(r.startswith("not a valid configuration: knobs.max_running_requests:")
                                     for r in reasons), reasons
    assert not any("\n" in r or ": :" in r for r in reasons)
