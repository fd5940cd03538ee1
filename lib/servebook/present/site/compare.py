"""The compare page's data: a script per run (its figures, formatted as every table formats them) and one per
configuration (the noise floor of a change from any of its runs, present.deltas), each rewritten only when the runs
it is drawn from change, so that a new run rewrites its own script and its configuration's, never every run's. The
page picks runs from the index's data (assets/index-data.js) and loads these scripts for the runs picked: a script
rather than JSON, since browsers refuse fetch() from file:// pages."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..deltas import FLOOR_LEGEND, compared_by_kind, compared_metrics, floor_figures, page_figures, run_figures
from .summary import RunSummary

FLOORS = "floors"


def configuration(s: RunSummary) -> str | None:
    """The file name of the floor of a run's configuration (its candidate under its plan); None for a run that
    names neither."""
    if not s.candidate_id or not s.plan_id:
        return None
    return hashlib.sha256(f"{s.candidate_id}\0{s.plan_id}".encode()).hexdigest()[:16]


def script(table: str, key: str, data: Any) -> str:
    """`window.SERVEBOOK_COMPARE[table][key] = data`, every "<" escaped so that no journal text closes a tag."""
    text = json.dumps(data, separators=(",", ":"), default=str).replace("<", "\\u003c")
    return ("(window.SERVEBOOK_COMPARE = window.SERVEBOOK_COMPARE || {runs: {}, floors: {}})"
            f"[{json.dumps(table)}][{json.dumps(key)}] = {text};\n")


def run_script(s: RunSummary, by_kind: dict[str, list]) -> str:
    return script("runs", s.run_id, {"label": s.label, "status": s.status, "floor": configuration(s),
                                     "cells": run_figures(s.cells, by_kind)})


def floor_script(key: str, runs: list[RunSummary]) -> str:
    """The floor of one configuration, from its completed runs that are not archived (they count for nothing)."""
    from ...journal.manifest import Environment
    from ...verdicts.noise import delta_floors

    kept = [s for s in runs if s.status == "completed" and not s.archived and s.cells]
    floors = delta_floors([(Environment.model_validate(s.environment).machine_key, s.cells) for s in kept],
                          compared_metrics())
    return script("floors", key, {"label": runs[-1].label, "runs": len(kept), "cells": floor_figures(floors)})


def compare_pages(builder: Any, summaries: list[RunSummary], links: Any) -> None:
    """Every run's script, every configuration's floor, and the page (`builder`: the SiteBuilder writing them)."""
    groups: dict[str, list[RunSummary]] = {}
    by_kind = compared_by_kind()
    for s in summaries:
        builder._page(f"runs/{s.run_id}/compare.js", [s.fingerprint], lambda s=s: run_script(s, by_kind))
        key = configuration(s)
        if key is not None:
            groups.setdefault(key, []).append(s)
    made = set()
    for key, runs in groups.items():
        made.add(page := f"{FLOORS}/{key}.js")
        builder._page(page, [[s.fingerprint for s in runs]], lambda key=key, runs=runs: floor_script(key, runs))
    for page in [p for p in builder.state["pages"] if p.startswith(f"{FLOORS}/") and p not in made]:
        (builder.out / page).unlink(missing_ok=True)  # a configuration whose runs are gone
        del builder.state["pages"][page]
    (builder.out / "assets" / "runs-data.js").unlink(missing_ok=True)  # every run's cells, which the page read before
    builder._page("compare.html", [links], lambda: builder._render(
        "compare.html.j2", "", title="compare runs", figures=page_figures(), legend=FLOOR_LEGEND))
