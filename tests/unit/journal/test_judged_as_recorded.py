"""Every committed journal judges byte for byte as it did before the cell kinds and judged metrics got one home
each (issue 31): `servebook judge --format json`, recorded on main at 2f63741 before the change."""

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servebook.cli import app

ROOT = Path(__file__).parents[3]
RECORDED = Path(__file__).parent / "recorded_judgements"
CASES = [("sample-journal", "h200-1b-llamacpp"), ("sample-journal", "h200-1b-capacity"),
         ("sample-journal", "h200-1b-search"), ("sample-journal-vllm", "h200-vllm-1b"),
         ("sample-journal-vllm-resident", "h200-vllm-1b-resident-pilot")]


@pytest.mark.parametrize(("journal", "study"), CASES)
def test_a_committed_journal_judges_as_recorded(journal, study, tmp_path):
    shutil.copytree(ROOT / "data" / journal, tmp_path / "journal")  # a read must not touch the repository
    result = CliRunner().invoke(app, ["judge", str(ROOT / "data" / "studies" / f"{study}.yaml"), "--journal",
                                      str(tmp_path / "journal"), "--format", "json",
                                      "--output", str(tmp_path / "judged.json")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "judged.json").read_bytes() == (RECORDED / f"{study}.json").read_bytes()
