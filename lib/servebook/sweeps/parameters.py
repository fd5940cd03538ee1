"""The parameters a sweep hands the qualify notebook: every one its parameters cell declares, so that nothing saved
in the template (a researcher's `overrides`, a plan path) reaches a run of a study (issue 56, item 4). A run of a
study is the study's candidate under the study's plan, both inline; the notebook's own ways of naming them (paths,
overrides) and its gate are set to "none" explicitly rather than left at whatever the template holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config.parameters import Seat
from ..config.study import Study, StudyEntry
from ..util.errors import InputError

#: the notebook's parameters a study does not use, set so that the template's saved values never apply
_NOT_FROM_A_STUDY: dict[str, Any] = {"candidate_path": None, "plan_path": None, "overrides": {}, "fail_on": None}


def qualify_parameters(study: Study, entry: StudyEntry, journal: str, run_id: str, gpus: list[int] | None = None,
                       lane: str | None = None, seat: Seat | None = None) -> dict[str, Any]:
    """Every parameter of the qualify notebook, as one run of `entry` in `study` gets it."""
    return {**_NOT_FROM_A_STUDY,
            "candidate": entry.candidate.model_dump(mode="json"), "plan": study.plan.model_dump(mode="json"),
            "journal": journal, "run_id": run_id, "study": study.name, "study_entry": entry.name,
            "visible_gpus": gpus, "lane": lane, "turns": seat.model_dump(mode="json") if seat is not None else None}


def check_declared(notebook: Path, parameters: dict[str, Any]) -> None:
    """Refuse a template whose parameters cell declares what the sweep does not set (its saved value would apply
    to every run), or that has no parameters cell (papermill would put the sweep's values above cells that may
    assign them again)."""
    import papermill

    declared = papermill.inspect_notebook(str(notebook))
    if not declared:
        raise InputError(f"{notebook}: no cell tagged `parameters`; servebook sweep runs only the qualify "
                         "notebook whose parameters cell it can replace whole")
    unset = [name for name in declared if name not in parameters]
    if unset:
        raise InputError(f"{notebook}: parameter {unset[0]!r} is not one servebook sweep sets, so its saved value "
                         f"would apply to every run; remove it from the parameters cell (sweep sets "
                         f"{', '.join(sorted(parameters))})")


def shown(study: Study, entry: StudyEntry, parameters: dict[str, Any]) -> list[str]:
    """The parameters as a dry run lists them: the inline candidate and plan by their ids, the rest as given."""
    named = {"candidate": f"<candidate {entry.candidate.id}, inline>", "plan": f"<plan {study.plan.id}, inline>"}
    return [f"{name}={named.get(name) or repr(value)}" for name, value in parameters.items()]
