"""`servebook report STUDY`: the study's answer, read from the journal (it judges without recording)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..config import InputError, load_study, parse_overrides
from ._app import JournalOption, StudySetOption, app, friendly, open_journal, out


@app.command("report")
@friendly
def report_cmd(
    study_file: Path = typer.Argument(..., help="study YAML whose recorded runs to report on"),
    journal: Optional[str] = JournalOption,
    report_format: str = typer.Option("text", "--format", help="text (the terminal) or markdown"),
    set_: list[str] = StudySetOption,
):
    """Which configuration to run and why: the recommended candidate with the cells that decided it, every
    candidate ranked, the study's question and each variant's note. Reads the journal; records nothing."""
    from ..present.report import study_report

    if report_format not in ("text", "markdown"):
        raise InputError(f"--format {report_format!r}: choose text or markdown")
    study = load_study(study_file, parse_overrides(set_) if set_ else None)
    found = study_report(study, open_journal(journal))
    if report_format == "markdown":
        print(found.markdown(), end="")
    else:
        out.print(found, soft_wrap=False)
