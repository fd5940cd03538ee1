"""Every committed journal judges byte for byte as it did before the cell kinds and judged metrics got one home
each (issue 31): `servebook judge --format json`, recorded on main at 2f63741 before the change.

`kinds-sim-journal` is a fresh study on the simulator (two candidates, two launches each) whose plan measures every
cell kind and whose rules judge every metric; its engine logs, chunks, scrapes, telemetry and notebooks are left
out, as judging reads none of them."""

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servebook.cli import app

ROOT = Path(__file__).parents[3]
RECORDED = Path(__file__).parent / "recorded_judgements"
STUDIES = ROOT / "data" / "studies"
CASES = [(ROOT / "data" / "sample-journal", STUDIES / "h200-1b-llamacpp.yaml"),
         (ROOT / "data" / "sample-journal", STUDIES / "h200-1b-capacity.yaml"),
         (ROOT / "data" / "sample-journal", STUDIES / "h200-1b-search.yaml"),
         (ROOT / "data" / "sample-journal-vllm", STUDIES / "h200-vllm-1b.yaml"),
         (ROOT / "data" / "sample-journal-vllm-resident", STUDIES / "h200-vllm-1b-resident-pilot.yaml"),
         (RECORDED / "kinds-sim-journal", RECORDED / "kinds-sim.yaml")]


@pytest.mark.parametrize(("journal", "study"), CASES, ids=[study.stem for _, study in CASES])
def test_a_committed_journal_judges_as_recorded(journal, study, tmp_path):
    shutil.copytree(journal, tmp_path / "journal")  # a read must not touch the repository
    result = CliRunner().invoke(app, ["judge", str(study), "--journal", str(tmp_path / "journal"), "--format", "json",
                                      "--output", str(tmp_path / "judged.json")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "judged.json").read_bytes() == (RECORDED / f"{study.stem}.json").read_bytes()
