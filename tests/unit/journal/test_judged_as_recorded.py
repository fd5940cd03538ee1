"""Every committed journal judges as it did before the cell kinds and judged metrics got one home
each (issue 31): `servebook judge --format json`, recorded on main at 2f63741 before the change; re-recorded when
the study model's feasible weighted least squares ran to convergence and took each candidate's degrees of freedom net
of the block effects fitted from its runs (2026-12-05: intervals changed, no outcome did); and again when (issue 55)
the JSON gained the tally (`counts`) and each candidate's `label` (the baseline's "baseline"), each side's figure
(`value`, `baseline`, a machine's baseline) became the geometric mean the tables show, and kinds-sim's TTFT p50 and
p90 rules, read from 1-2 requests per cell, became `insufficient` (measure.figures.tails), which leaves them out of Holm's
family (13 cells to 9, so the other cells' levels and bounds moved); no outcome changed; and again when (issue 55)
each candidate gained its `side_effects` (verdicts.side_effects), added to the recorded files with every other
field as it was; and again when (issue 55, words once) a cell's words left Holm's rule to the verdict's method
("(limit -7%; beyond it, Holm over 4 cells)" became "(limit -7%)") and the cells left out as disturbed became a typed
`left_out_cells` instead of a reason each, both applied to the recorded files with every other field as it was;
and reordered (2026-12-07) where two side effects tie (a prefill cell's TTFT and E2E p50, equal to 1e-13, whose
last bits differed between numpy builds: ties now read in the figures' order), every value as it was; and
(issue 54, one report for every output) each candidate with `left_out_cells` gained the line every output says of
them (`left_out_line`), added to the recorded files with every other field as it was.

`kinds-sim-journal` is a fresh study on the simulator (two candidates, two launches each) whose plan measures every
cell kind and whose rules judge every metric; its engine logs, chunks, scrapes, telemetry and notebooks are left
out, as judging reads none of them."""

import json
import math
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servebook.cli import app
from servebook.journal import samples

ROOT = Path(__file__).parents[3]
RECORDED = Path(__file__).parent / "recorded_judgements"
STUDIES = ROOT / "data" / "studies"
CASES = [(samples.sample_journal("sample-journal"), STUDIES / "h200-1b-llamacpp.yaml"),
         (samples.sample_journal("sample-journal"), STUDIES / "h200-1b-capacity.yaml"),
         (samples.sample_journal("sample-journal"), STUDIES / "h200-1b-search.yaml"),
         (samples.sample_journal("sample-journal-vllm"), STUDIES / "h200-vllm-1b.yaml"),
         (samples.sample_journal("sample-journal-vllm-resident"), STUDIES / "h200-vllm-1b-resident-pilot.yaml"),
         (RECORDED / "kinds-sim-journal", RECORDED / "kinds-sim.yaml")]


@pytest.mark.parametrize(("journal", "study"), CASES, ids=[study.stem for _, study in CASES])
def test_a_committed_journal_judges_as_recorded(journal, study, tmp_path):
    shutil.copytree(journal, tmp_path / "journal")  # a read must not touch the repository
    result = CliRunner().invoke(app, ["judge", str(study), "--journal", str(tmp_path / "journal"), "--format", "json",
                                      "--output", str(tmp_path / "judged.json")])
    assert result.exit_code == 0, result.output
    judged = json.loads((tmp_path / "judged.json").read_text())
    recorded = json.loads((RECORDED / f"{study.stem}.json").read_text())
    assert _differences(judged, recorded) == []


def _differences(got, want, where: str = "") -> list[str]:
    """Where two judgements differ: every key, string, count and outcome exactly, floats to 1e-9 of their size (a
    new numpy or pandas sums in another order: 0.0353582502533 against 0.0353582502530 is the same judgement)."""
    if isinstance(want, float) or isinstance(got, float):
        same = isinstance(got, (int, float)) and isinstance(want, (int, float)) and (
            math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9) or (math.isnan(got) and math.isnan(want)))
        return [] if same else [f"{where}: {got!r} != {want!r}"]
    if isinstance(want, dict) and isinstance(got, dict):
        if list(got) != list(want):
            return [f"{where}: keys {list(got)} != {list(want)}"]
        return [d for key in want for d in _differences(got[key], want[key], f"{where}.{key}")]
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return [f"{where}: {len(got)} items != {len(want)}"]
        return [d for i, (g, w) in enumerate(zip(got, want, strict=True)) for d in _differences(g, w, f"{where}[{i}]")]
    return [] if got == want and type(got) is type(want) else [f"{where}: {got!r} != {want!r}"]
