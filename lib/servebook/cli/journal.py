"""Commands that read the journal: its runs, one run, a configuration's history and two slices compared."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Optional

import typer

from ..config import InputError
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
               where: list[str] = typer.Option([], "--where", help="FIELD OP VALUE (= != > >= < <=), repeatable: an "
                                               "index column (status, study, verdict, tags, archived, ...), "
                                               "knobs.NAME, or a metric (aggregate_tok_s: the run's best valid "
                                               "cell; aggregate_tok_s@decode-prose-c4: that cell)"),
               sort: Optional[str] = typer.Option(None, "--sort", help="FIELD, FIELD:asc or FIELD:desc (any --where "
                                                  "field); runs without it last, and the newest N of the "
                                                  "sorted runs are the last N"),
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
    from ..journal.browse import browse

    # --study and --status are typed as --where's are: a misspelled status or study is an error, not zero runs
    matching, extra = browse(j.select(since=since, candidate=candidate, frame=every), j.run,
                             [f"{k}={v}" for k, v in (("study", study), ("status", status)) if v] + list(where), sort)
    chosen = matching.tail(limit) if limit else matching
    print_listing(listing_format, lambda: j.listing(wide=wide, frame=chosen, total=len(every), extra=extra),
                  lambda: chosen.astype(object).where(chosen.notna(), None).to_dict("records"),
                  lambda: chosen.to_csv(index=False))
    if len(chosen) < len(matching):
        err.print(f"showing the newest {len(chosen)} of {len(matching)}; --limit 0 for all, or filter with "
                  "--study/--candidate/--status/--since")


@journal_app.command("show")
@friendly
def journal_show(run_ids: list[str] = typer.Argument(..., help="one run id, or several to set side by side (a "
                                                             "unique prefix or fragment of each is enough)"),
                 journal: Optional[str] = JournalOption):
    """One run's tables, or its failure cause and log tail; several runs side by side, cell by cell."""
    from ..present import report

    opened = open_journal(journal)
    records = [opened.run(run_id) for run_id in run_ids]
    if len(records) > 1:
        from ..present.comparison import RunComparison

        out.print(RunComparison.against_first(opened, records))
        for record in records:
            out.print(f"{record.run_id}: {record.dir}", highlight=False)
        return
    record = records[0]
    out.print(report(record))
    annotations = record.annotations.lines()
    if annotations:
        out.print("\n" + "\n".join(annotations), highlight=False)
    out.print(f"\n{record.dir}")


def _rules_of(study, limit_pct: float) -> list:
    """The study's rules (the cells a verdict judges), or every decode and prefill cell at `limit_pct`."""
    import math

    from ..verdicts import default_rules

    if study is None and not (math.isfinite(limit_pct) and limit_pct >= 0):
        raise InputError(f"--limit {limit_pct:g}: the regression each cell may show, a percentage of 0 or more "
                         "(e.g. 5)")
    return list(study.verdict.rules) if study is not None else default_rules(limit_pct)


@app.command("history")
@friendly
def history_cmd(
    candidate: str = typer.Argument(..., help="a candidate's name (a study entry's name) or a prefix of its id"),
    journal: Optional[str] = JournalOption,
    study_arg: Optional[str] = typer.Option(None, "--study", help="the study whose runs to follow: its name as "
                                                                  "recorded, or its YAML (whose rules then pick the "
                                                                  "cells); needed where several studies share the "
                                                                  "candidate's name"),
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
    is_file = study_arg is not None and (study_arg.endswith((".yaml", ".yml")) or Path(study_arg).is_file())
    study = load_study(Path(study_arg)) if is_file and study_arg else None
    found = history(open_journal(journal), candidate, rules=_rules_of(study, 5.0), machine=machine,
                    plan_id=plan, study=study.name if study else study_arg)
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
    opened = open_journal(journal)
    result = compare_slices(opened, parse_slice(a, "--a"), parse_slice(b, "--b"),
                            _rules_of(load_study(study_file) if study_file else None, limit))
    print_listing(compare_format, SliceComparisonView(result).blocks, lambda: asdict(result))
    if compare_format == "text":  # the requests/s each slice held, and under which objectives
        from ..present.load_tables import capacity_cells, capacity_estimates
        from ..util.render import to_rich

        held = capacity_estimates(capacity_cells({"A": [opened.run(r) for r in result.runs_a],
                                                  "B": [opened.run(r) for r in result.runs_b]}, "slice"), "slice")
        if held is not None:
            out.print(to_rich([held]))


def _annotated(journal: Optional[str], run_id: str):
    """The run to annotate, in a journal that can take the event (annotating is the journal's one edit of a sealed
    run, and it adds a file beside the run, never touching what was sealed)."""
    j = open_journal(journal)
    record = j.run(run_id)
    if record.status == "incomplete":
        raise InputError(f"run {record.run_id} is not sealed yet; annotate it once it is")
    j.ensure_writable()
    return record


@journal_app.command("tag")
@friendly
def journal_tag(run_id: str = typer.Argument(..., help="run id (a unique prefix or fragment is enough)"),
                tags: list[str] = typer.Argument(..., help="one or more tags (letters, digits, _ . - : + @ = /)"),
                remove: bool = typer.Option(False, "--remove", help="take these tags off instead"),
                journal: Optional[str] = JournalOption):
    """Tag a run (`journal ls --where tags=TAG` finds it); kept beside the sealed run, which is not changed."""
    from ..journal.annotations import check_tag

    record = _annotated(journal, run_id)
    for tag in tags:
        record.annotate("untag" if remove else "tag", check_tag(tag))
    out.print(f"run {record.run_id}: tags {', '.join(record.annotations.tags) or 'none'}", highlight=False)


@journal_app.command("note")
@friendly
def journal_note(run_id: str = typer.Argument(..., help="run id (a unique prefix or fragment is enough)"),
                 text: str = typer.Argument(..., help="the note, e.g. \"host rebooted between rounds\""),
                 journal: Optional[str] = JournalOption):
    """Add a note to a run, shown by `journal show` and on its site page; notes are kept in order, never edited."""
    record = _annotated(journal, run_id)
    record.annotate("note", text)
    out.print(f"run {record.run_id}: {len(record.annotations.notes)} notes", highlight=False)


@journal_app.command("archive")
@friendly
def journal_archive(run_id: str = typer.Argument(..., help="run id (a unique prefix or fragment is enough)"),
                    why: str = typer.Option("", "--why", help="why it is no evidence (required to archive), e.g. "
                                                              "\"another job shared the GPU\""),
                    undo: bool = typer.Option(False, "--undo", help="restore an archived run (--why says why)"),
                    journal: Optional[str] = JournalOption):
    """Archive a bad run: it stays in the journal, marked, and verdicts, histories and comparisons leave it out,
    naming it and the reason; a sweep runs its repeat again. --undo restores it."""
    record = _annotated(journal, run_id)
    if not why.strip() and not undo:
        raise InputError("journal archive: say why with --why \"...\" (the verdicts print it where they leave the "
                         "run out)")
    if undo and not record.archived:
        raise InputError(f"run {record.run_id} is not archived")
    record.annotate("unarchive" if undo else "archive", why.strip() or "restored")
    state = "restored" if undo else f"archived ({why.strip()}); re-judge its study to see the verdicts without it"
    out.print(f"run {record.run_id}: {state}", highlight=False)


@journal_app.command("import")
@friendly
def journal_import(source: Path = typer.Argument(..., help="another journal: its directory, or an archive of one "
                                                             "(.tar.xz as tools/gpu-host/gpu-host.sh pack writes)"),
                   journal: Optional[str] = JournalOption):
    """Copy another journal's sealed runs into this one (a second machine's runs of the same study): each run whole
    and unchanged, runs already here left alone. Judge the study afterwards: machines are blocks, and a cell that
    holds on one machine and not another is said so, with each machine's figure."""
    from ..journal.merge import import_runs

    if not source.exists():
        raise InputError(f"journal import: {source} does not exist")
    done = import_runs(open_journal(journal, create=True), source)
    out.print(done.text(), highlight=False)
    if done.conflicts or done.refused:
        raise typer.Exit(1)


@journal_app.command("samples")
@friendly
def journal_samples(names: Optional[list[str]] = typer.Argument(None, help="only these sample journals (default: "
                                                                         "every one)"),
                    out_dir: Path = typer.Option(Path("sample-journals"), "--out",
                                                 help="extract them here, one folder each (git ignores the default "
                                                      "in the project root)")):
    """The GPU sessions' sample journals (docs/findings/ cites each by name) extracted from the checkout's
    data/sample-journals.tar.xz into OUT, and each one's runs and studies. A folder already in OUT is left as it is.
    Read them there (`servebook journal ls --journal sample-journals/sample-journal-vllm`, `servebook site`), or
    re-pack the archive from OUT after adding one (`make sample-journals`)."""
    from ..journal.samples import copy_samples, describe

    for name, copied in copy_samples(out_dir, names or None):
        sample = describe(out_dir / name)
        state = "" if copied else "  (already there: left as it was)"
        out.print(f"{name:<30} {sample.runs:>3} runs  {', '.join(sample.studies) or '-'}{state}", highlight=False)
    out.print(f"in {out_dir}", highlight=False)
