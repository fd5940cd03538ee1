"""Commands that read the journal: its runs, one run, a configuration's history and two slices compared."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Optional

import typer

from ._app import (
    JournalOption,
    app,
    check_listing_format,
    err,
    friendly,
    journal_app,
    listing_format_option,
    open_journal,
    out,
    print_listing,
)


@journal_app.command("ls")
@friendly
def journal_ls(journal: Optional[str] = JournalOption,
               wide: bool = typer.Option(False, "--wide", help="every column and the full run ids"),
               study: Optional[str] = typer.Option(None, help="only runs of this study"),
               candidate: Optional[str] = typer.Option(None, help="only runs of this candidate (its name or a "
                                                                  "prefix of its id)"),
               status: Optional[str] = typer.Option(None, help="only runs with this status (completed, failed, "
                                                               "incomplete, interrupted, damaged)"),
               since: Optional[str] = typer.Option(None, help="only runs started at or after this ISO date or time"),
               limit: int = typer.Option(50, help="the newest N runs that match (0: all)"),
               listing_format: str = listing_format_option("one object per run, the index's columns; csv "
                                                           "has the same columns")):
    """Runs in the journal, newest last, incomplete ones included (fits 80 columns; --wide for all columns).
    Reads index.parquet, refreshed only for runs sealed or judged since it was written."""
    check_listing_format(listing_format)
    j = open_journal(journal)
    every = j.index()
    if every.empty:
        out.print(f"no runs in {j.location}")
        return
    matching = j.select(study=study, status=status, since=since, candidate=candidate, frame=every)
    chosen = matching.tail(limit) if limit else matching
    print_listing(listing_format, lambda: j.listing(wide=wide, frame=chosen, total=len(every)),
                  lambda: chosen.astype(object).where(chosen.notna(), None).to_dict("records"),
                  lambda: chosen.to_csv(index=False))
    if len(chosen) < len(matching):
        err.print(f"showing the newest {len(chosen)} of {len(matching)}; --limit 0 for all, or filter with "
                  "--study/--candidate/--status/--since")


@journal_app.command("show")
@friendly
def journal_show(run_id: str = typer.Argument(..., help="run id (a unique prefix or fragment is enough)"),
                 journal: Optional[str] = JournalOption):
    """One run's tables, or its failure cause and log tail."""
    from ..present import report

    record = open_journal(journal).run(run_id)
    out.print(report(record))
    out.print(f"\n{record.dir}")


def _rules_of(study, limit_pct: float) -> list:
    """The study's rules (the cells a verdict judges), or every decode and prefill cell at `limit_pct`."""
    from ..verdicts import default_rules

    return list(study.verdict.rules) if study is not None else default_rules(limit_pct)


@app.command("history")
@friendly
def history_cmd(
    candidate: str = typer.Argument(..., help="a candidate's name (a study entry's name) or a prefix of its id"),
    journal: Optional[str] = JournalOption,
    study_file: Optional[Path] = typer.Option(None, "--study", help="a study YAML: follow the cells its rules judge, "
                                                                     "and only runs this study recorded"),
    machine: Optional[str] = typer.Option(None, help="a fragment of the machine identity (default: where it ran last)"),
    plan: Optional[str] = typer.Option(None, help="a plan id (default: the newest run's)"),
    history_format: str = listing_format_option("every series with its points and steps"),
):
    """Every run of one configuration on one machine over time: engine, image and driver changes marked, and the
    steps its figures took, each with the runs before and after and the change with its interval."""
    from ..config import load_study
    from ..present.history import HistoryView
    from ..verdicts import history

    check_listing_format(history_format)
    study = load_study(study_file) if study_file else None
    found = history(open_journal(journal), candidate, rules=_rules_of(study, 5.0), machine=machine,
                    plan_id=plan, study=study.name if study else None)
    print_listing(history_format, HistoryView(found).blocks, lambda: asdict(found))


@app.command("compare")
@friendly
def compare_cmd(
    a: str = typer.Option(..., "--a", help="the reference slice: key=value pairs, e.g. candidate=baseline,"
                                           "engine_version=1.0 (keys: candidate study plan_id engine_version "
                                           "image_digest driver machine since until)"),
    b: str = typer.Option(..., "--b", help="the slice compared with it, e.g. candidate=baseline,since=2026-11-23"),
    journal: Optional[str] = JournalOption,
    study_file: Optional[Path] = typer.Option(None, "--study", help="judge the cells and limits of this study's rules"),
    limit: float = typer.Option(5.0, help="without --study: the regression (percent) each cell may show"),
    compare_format: str = listing_format_option("the slices, their runs and every cell's comparison"),
):
    """Two slices of a journal compared per cell with the verdicts' statistics (machines as blocks)."""
    from ..config import load_study
    from ..config.slices import parse_slice
    from ..present.history import SliceComparisonView
    from ..verdicts import compare_slices

    check_listing_format(compare_format)
    result = compare_slices(open_journal(journal), parse_slice(a, "--a"), parse_slice(b, "--b"),
                            _rules_of(load_study(study_file) if study_file else None, limit))
    print_listing(compare_format, SliceComparisonView(result).blocks, lambda: asdict(result))
