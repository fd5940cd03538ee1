"""`servebook search`: a study's configuration search, pruned, screened and confirmed within a budget."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..config import InputError, load_study, parse_overrides
from ..util.progress import Reporter
from ._app import JournalOption, StudySetOption, app, friendly, open_journal, out, writable_output


@app.command("search")
@friendly
def search_cmd(
    study_file: Path = typer.Argument(..., help="study YAML with a search section (space, objective, budget)"),
    journal: Optional[str] = JournalOption,
    budget: Optional[int] = typer.Option(None, "--budget", min=4, help="engine launches at most, screening and "
                                                                       "confirmation together (default: the study's)"),
    parallel: str = typer.Option("1", "--parallel", help="auto (or N): screen and confirm on disjoint GPU groups at "
                                                          "once; serial on hosts without GPUs"),
    gpus: Optional[str] = typer.Option(None, "--gpus", help="with --parallel: the GPU indices to share out"),
    ray: Optional[str] = typer.Option(None, "--ray", help="a Ray cluster address (auto, ray://host:10001): each "
                                                           "launch becomes a Ray task asking for its GPUs"),
    kernel: str = typer.Option("python3", help="Jupyter kernel name for papermill"),
    execution_timeout: int = typer.Option(3600, help="seconds one notebook cell may run"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="also write the search's record as JSON"),
    set_: list[str] = StudySetOption,
):
    """Search a study's space of knobs: configurations that cannot fit in memory are recorded and never launched,
    the rest are screened with a short plan where a model of the space expects most, and the best few are
    confirmed with interleaved repeats, so the winner comes with an interval against the runner-up. Resumes
    from the journal."""
    from ..sweeps import search

    study = load_study(study_file, parse_overrides(set_) if set_ else None)
    writable_output(output)  # before the launches, not after the whole budget of them
    try:
        gpu_list = [int(g) for g in gpus.split(",")] if gpus else None
    except ValueError:
        raise InputError(f"--gpus {gpus!r}: comma-separated GPU indices, e.g. 0,1,2,3") from None
    j = open_journal(journal, create=True).ensure_writable()
    if ray:
        from ..distributed import search_on_ray

        result = search_on_ray(study, j, address=ray, reporter=Reporter(), budget=budget, kernel_name=kernel,
                               execution_timeout=execution_timeout)
    else:
        result = search(study, j, reporter=Reporter(), budget=budget, gpus=gpu_list, kernel_name=kernel,
                        execution_timeout=execution_timeout,
                        parallel=parallel if parallel == "auto" else (int(parallel) if parallel.isdigit() else parallel))
    out.print(result)
    if output is not None:
        output.write_text(json.dumps(result.to_json(), indent=1, default=str))
    out.print(f"\nrecorded in {j.location}/searches/{study.name}/", highlight=False)
