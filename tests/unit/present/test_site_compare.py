"""compare.html for N runs (issue 55, item 8): the build writes a script per run (its figures as every table formats
them) and one per configuration (the noise floor of a change from any of its runs), each rewritten only when its runs
change; `journal show A B C` and the compare notebook grey the same changes by the same floor (verdicts.DeltaFloor).
The page itself, three runs picked in Chromium, is tests/e2e/test_site_browser.py's."""

import math
import re
import statistics

import pytest

from servebook.journal import Journal
from servebook.journal.synthetic import write_synthetic_run
from servebook.present import build_site
from servebook.present.comparison import RunComparison
from servebook.present.kinds import compared_figures
from servebook.present.site.pages import summarize_run
from servebook.present.tables import fmt, tail_marked
from servebook.util.render import to_html, to_plain
from servebook.verdicts.noise import FLOOR_Z
from tests.helpers.journals import compare_journal
from tests.helpers.journals import read_compare_script as read_script


def cv_of(records, cell_id: str, metric: str) -> float:
    """The between-run CV (a fraction) of one figure over runs of one machine, computed here from the runs' cells."""
    values = [r.table("cells").set_index("cell_id").at[cell_id, metric] for r in records]
    return statistics.stdev(values) / statistics.fmean(values)


def test_each_run_and_each_configuration_has_a_script_of_its_own(tmp_path):
    runs = compare_journal(tmp_path / "journal")
    site = tmp_path / "site"
    build_site(Journal(tmp_path / "journal"), site)
    base = runs["base"]
    key, data = read_script(site / "runs" / base[0].run_id / "compare.js")
    assert key == base[0].run_id and data["label"] == "base" and data["status"] == "completed"
    cells = {c["cell_id"]: c for c in summarize_run(base[0]).cells}  # with each percentile's samples counted
    figures = {(f.kind, f.metric): f for f in compared_figures()}
    assert {entry["cell"] for entry in data["cells"]} == set(cells)  # every decode and prefill cell has a figure
    for entry in data["cells"]:
        cell = cells[entry["cell"]]
        assert entry["kind"] == cell["kind"] and entry["valid"] is True
        for metric, (value, text) in entry["figures"].items():
            figure = figures[(cell["kind"], metric)]
            assert value == pytest.approx(cell[metric])
            assert text == tail_marked(fmt(cell[metric], figure.format, figure.scale), cell, metric)

    # base's floor: FLOOR_Z (1.96 x sqrt 2) times the between-run CV of its three runs, as ratio bounds
    floor_key, floor = read_script(site / "floors" / f"{data['floor']}.js")
    assert floor_key == data["floor"] and floor["runs"] == 3 and floor["label"] == "base"
    for cell_id, metric in [("decode-prose-c1", "aggregate_tok_s"), ("prefill-2048", "prefill_tok_s")]:
        bound = floor["cells"][cell_id][metric]
        assert bound["high"] == pytest.approx(math.exp(FLOOR_Z * cv_of(base, cell_id, metric)))
        assert bound["low"] == pytest.approx(1 / bound["high"]) and "over 3 runs" in bound["text"]
    # one run of its configuration: no floor; a failed run: no cells
    near = read_script(site / "runs" / runs["near"][0].run_id / "compare.js")[1]
    assert read_script(site / "floors" / f"{near['floor']}.js")[1] == {"label": "near", "runs": 1, "cells": {}}
    assert read_script(site / "runs" / runs["refused"][0].run_id / "compare.js")[1]["cells"] == []
    assert not (site / "assets" / "runs-data.js").exists()  # every run's cells in one file, rewritten each build


def test_a_new_run_rewrites_its_own_script_and_its_configurations_floor_and_no_other(tmp_path):
    runs = compare_journal(tmp_path / "journal")
    journal = Journal(tmp_path / "journal")
    site = tmp_path / "site"
    build_site(journal, site)
    floor = read_script(site / "runs" / runs["base"][0].run_id / "compare.js")[1]["floor"]
    new = write_synthetic_run(journal, index=7, label="base", speed=1.0, chunk_size=256, requests=20, study="compare")
    written = build_site(journal, site).written
    scripts = {page for page in written if page.endswith(".js") and not page.startswith("assets/")}
    assert scripts == {f"runs/{new.run_id}/compare.js", f"floors/{floor}.js"}
    assert read_script(site / "floors" / f"{floor}.js")[1]["runs"] == 4
    assert build_site(journal, site).written == []


def test_runs_side_by_side_grey_each_change_within_the_first_runs_floor(tmp_path):
    runs = compare_journal(tmp_path / "journal")
    base, near, far = runs["base"], runs["near"][0], runs["far"][0]
    comparison = RunComparison.against_first(Journal(tmp_path / "journal"), [base[0], near, far])
    [table] = [t for t in comparison.tables() if t.title == "Aggregate decode tok/s"]
    assert table.columns == ["cell", "base", "near", "near: change", "far", "far: change"]
    greyed = {}
    for row in table.rows:
        cell_id = row.values[0]
        bound = FLOOR_Z * cv_of(base, cell_id, "aggregate_tok_s")
        figures = {r.run_id: r.table("cells").set_index("cell_id").at[cell_id, "aggregate_tok_s"] for r in (near, far)}
        within = abs(math.log(figures[near.run_id] / base[0].table("cells").set_index("cell_id").at[
            cell_id, "aggregate_tok_s"])) <= bound
        assert (row.style_of(3) == "dim") == within and row.values[3].startswith("~") == within
        assert row.style_of(5) == "" and not row.values[5].startswith("~")  # half as fast again: beyond any floor
        greyed[cell_id] = within
    assert any(greyed.values()) and not all(greyed.values()), greyed  # both cases, or the test tells nothing
    shown = to_plain(comparison.blocks())
    assert "Changes from base, the first run given." in shown and "noise floor" in shown
    assert re.search(r'color:#6b7280">~[-+]\d', to_html(comparison.blocks()))  # the notebook greys it too
