"""What the notebooks call: each notebook cell is one line over these helpers."""

from __future__ import annotations

import os
from typing import Any

from .config import Candidate, InputError, Plan, load_candidate, load_plan, load_study, validate, with_overrides
from .journal import Journal, RunRecord
from .present import RunComparison
from .util.progress import Reporter
from .verdicts import judge, noise_floor


def resolve_candidate(candidate: dict | None = None, candidate_path: str | None = None,
                      overrides: dict[str, Any] | None = None) -> Candidate:
    """The notebook's parameters as a validated candidate; a bad parameter fails here, before launch."""
    if candidate is not None:
        resolved = validate(Candidate, candidate, "notebook parameters")
    elif candidate_path:
        resolved = load_candidate(candidate_path)
    else:
        raise InputError("parameters: set candidate_path (a YAML file) or candidate (inline fields)")
    return with_overrides(resolved, overrides, "notebook parameters (overrides)") if overrides else resolved


def resolve_plan(plan: dict | None = None, plan_path: str | None = None) -> Plan:
    if plan is not None:
        return validate(Plan, plan, "notebook parameters (plan)")
    return load_plan(plan_path)


def qualify(*, candidate: dict | None = None, candidate_path: str | None = None, plan: dict | None = None,
            plan_path: str | None = None, overrides: dict[str, Any] | str | None = None, journal: str = "journal",
            run_id: str | None = None, study: str | None = None, study_entry: str | None = None,
            visible_gpus: list[int] | int | str | None = None, lane: str | None = None,
            turns: dict[str, Any] | None = None) -> RunRecord:
    """Run one candidate and return its record (a one-line summary when displayed; `report(record)` has
    the tables). `visible_gpus`: the GPUs this run may use, and `lane`: the GPU group or node it was placed on
    (a block of the design), as a parallel sweep assigns them; `turns`: the run's seat in a resident round
    (`sweep --resident`)."""
    from .config.parameters import QualifyParameters
    from .run import run_candidate

    given = validate(QualifyParameters, {
        "candidate": candidate, "candidate_path": candidate_path, "plan": plan, "plan_path": plan_path,
        "overrides": overrides, "journal": journal, "run_id": run_id, "study": study, "study_entry": study_entry,
        "visible_gpus": visible_gpus, "lane": lane, "turns": turns}, "notebook parameters")
    candidate, overrides, visible_gpus = given.candidate, given.overrides, given.visible_gpus
    if visible_gpus is not None:
        # The kernel is this run's own process: the engine it starts, and preflight, see only these GPUs.
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in visible_gpus)
    resolved = resolve_candidate(candidate, candidate_path, overrides)
    resolved_plan = resolve_plan(plan, plan_path)
    context = {k: v for k, v in {"study": study, "study_entry": study_entry}.items() if v}
    return run_candidate(resolved, resolved_plan, Journal(journal), reporter=Reporter(),
                         extra_manifest=context, run_id=run_id, seat=given.turns, lane=given.lane)


def check_gate(run: RunRecord, fail_on: str | None) -> str:
    """The run's own outcome (failed: no numbers; rejected: an invalid cell, a failed gate, unreconciled counters;
    accepted otherwise); raises GateFailed when it is one of `fail_on` ("rejected,failed"), so that a papermill
    execution of qualify.ipynb fails the job, as `servebook judge --fail-on` does for a study."""
    from .config import VerdictRules
    from .util.errors import GateFailed
    from .verdicts import GATE_EXIT_CODES, judge_run, parse_fail_on

    chosen = parse_fail_on(fail_on, "fail_on")
    verdict = judge_run(run.manifest, run.table("cells") if run.status == "completed" else None, None,
                        VerdictRules(), is_baseline=True)
    if verdict.outcome in chosen:
        raise GateFailed(f"gate failed (exit {GATE_EXIT_CODES[verdict.outcome]}): run {run.run_id} "
                         f"{verdict.outcome}: {'; '.join(verdict.lines())}", GATE_EXIT_CODES[verdict.outcome])
    return verdict.outcome


def show(*objects) -> None:
    """Display reports and plotly figures inline (falls back to rich in a terminal)."""
    try:
        from IPython.display import display
    except ImportError:  # pragma: no cover - plain python
        from rich import print as rich_print

        for obj in objects:
            rich_print(obj)
        return
    for obj in objects:
        display(obj)


def compare(*, study_path: str | None = None, run_ids: list[str] | str | None = None,
            journal: str = "journal") -> RunComparison:
    """Runs side by side: a study's latest run per candidate, or the given run ids (a list, or "a,b" as
    `papermill -p run_ids a,b` passes it)."""
    from .config.parameters import CompareParameters

    given = validate(CompareParameters, {"study_path": study_path, "run_ids": run_ids, "journal": journal},
                     "notebook parameters")
    study_path, run_ids = given.study_path, given.run_ids
    j = Journal(given.journal).require()
    if run_ids:
        return RunComparison.against_first(j, [j.run(r) for r in run_ids])
    if study_path:
        study = load_study(study_path)
        judged = judge(study, j, append=False)
        runs = [record for item in judged for record in item.records]
        if not runs:
            raise InputError(f"{study_path}: no runs of study {study.name} in {j.location}; "
                             f"run `servebook sweep {study_path}` first")
        comparisons = [{**c.to_dict(), "candidate": item.entry.name} for item in judged if item.verdict
                       for c in item.verdict.comparisons]
        return RunComparison(runs, comparisons, noise_floor(study, j, judged))
    raise InputError("parameters: set study_path or run_ids")
