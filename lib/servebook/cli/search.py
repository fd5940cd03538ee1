"""`servebook search`: a study's configuration search, pruned, screened and confirmed within a budget."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..config import load_study, parse_overrides
from ..util.progress import Reporter
from ._app import JournalOption, StudySetOption, app, friendly, open_journal, out, study_runner, writable_output


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
    from ..sweeps import SweepOptions, search
    from ..sweeps.options import parse_gpus, parse_parallel

    study = load_study(study_file, parse_overrides(set_) if set_ else None)
    writable_output(output)  # before the launches, not after the whole budget of them
    options = SweepOptions(parallel=parse_parallel(parallel), gpus=parse_gpus(gpus))
    j = open_journal(journal, create=True).ensure_writable()
    result = search(study, j, options, runner=study_runner(ray, kernel, execution_timeout), reporter=Reporter(),
                    budget=budget)
    out.print(result)
    if output is not None:
        output.write_text(json.dumps(result.to_json(), indent=1, default=str))
    out.print(f"\nrecorded in {j.location}/searches/{study.name}/", highlight=False)
    if result.winner is None:  # a search that names no configuration found nothing: a script must see it
        raise typer.Exit(1)
