"""The `servebook` command: a thin shell that turns arguments into models and calls the library."""

from __future__ import annotations

import os
import sys
from functools import wraps
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from .candidate import InputError, load_candidate
from .engine_install import EngineInstallError, find_llamacpp, install_llamacpp
from .journal import Journal
from .plan import load_plan
from .progress import Reporter

app = typer.Typer(help="Qualify LLM serving configurations; keep every run in a journal.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
engine_app = typer.Typer(help="The embedded default engine (llama.cpp's llama-server).", no_args_is_help=True)
models_app = typer.Typer(help="Generated models for tests and demos.", no_args_is_help=True)
journal_app = typer.Typer(help="Read the journal.", no_args_is_help=True)
app.add_typer(engine_app, name="engine")
app.add_typer(models_app, name="models")
app.add_typer(journal_app, name="journal")

out = Console()
err = Console(stderr=True)

JournalOption = typer.Option(
    None, "--journal", "-j", help="journal directory (default: $SERVEBOOK_JOURNAL or ./journal)"
)


def _journal(path: Optional[Path]) -> Journal:
    return Journal(path or os.environ.get("SERVEBOOK_JOURNAL") or "journal")


def _friendly(fn):
    """One clear message and a non-zero exit for bad input, instead of a traceback."""

    @wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except InputError as error:
            err.print(f"[bold red]error:[/] {error}", markup=True, highlight=False)
            raise typer.Exit(2)
        except EngineInstallError as error:
            err.print(f"[bold red]engine install failed:[/] {error}", highlight=False)
            raise typer.Exit(3)
        except KeyboardInterrupt:
            err.print("[yellow]interrupted[/]: the engine was stopped; an unsealed run shows as incomplete")
            raise typer.Exit(130)

    return wrapper


@engine_app.command("install")
@_friendly
def engine_install(
    kind: str = typer.Argument("llamacpp", help="engine to build; only llamacpp is built locally"),
    force: bool = typer.Option(False, help="rebuild even if a build is cached"),
):
    """Build llama-server from the pinned llama-cpp-python sdist and cache it (idempotent)."""
    if kind != "llamacpp":
        raise InputError(f"engine install: only llamacpp is built here, not {kind!r}")
    install = install_llamacpp(reporter=Reporter(), force=force)
    out.print(f"llama-server: {install.server}")


@engine_app.command("info")
@_friendly
def engine_info():
    """Where the cached engine build is, and what it is."""
    install = find_llamacpp()
    if install is None:
        out.print("llama-server is not built; run `servebook engine install llamacpp`")
        raise typer.Exit(1)
    out.print_json(data={"server": str(install.server), **install.info})


@models_app.command("tiny")
@_friendly
def models_tiny():
    """Write the deterministic random-weight tiny target and draft models (if missing)."""
    from .tiny_models import ensure_tiny_models

    for name, path in ensure_tiny_models(reporter=Reporter()).items():
        out.print(f"tiny:{name}  {path}  ({path.stat().st_size / 1e6:.0f} MB)")


def _parse_sets(values: list[str]) -> dict:
    import yaml

    overrides = {}
    for item in values:
        key, eq, raw = item.partition("=")
        if not eq:
            raise InputError(f"--set {item!r}: expected KEY=VALUE, for example knobs.chunk_size=256")
        overrides[key.strip()] = yaml.safe_load(raw)
    return overrides


@app.command("run")
@_friendly
def run(
    candidate_file: Path = typer.Argument(..., help="candidate YAML"),
    plan_file: Optional[Path] = typer.Option(None, "--plan", "-p", help="plan YAML (default: the built-in plan)"),
    journal: Optional[Path] = JournalOption,
    set_: list[str] = typer.Option([], "--set", help="override a candidate field, e.g. knobs.chunk_size=256"),
):
    """Launch one candidate, measure it, reconcile, and record the run in the journal."""
    from pydantic import ValidationError

    from .candidate import format_validation_error
    from .report import RunReport
    from .runner import run_candidate

    candidate = load_candidate(candidate_file)
    if set_:
        try:
            candidate = candidate.with_overrides(_parse_sets(set_))
        except ValidationError as error:
            raise InputError(format_validation_error(error, "--set")) from None
    plan = load_plan(plan_file)
    record = run_candidate(candidate, plan, _journal(journal), reporter=Reporter())
    out.print(RunReport(record))
    out.print(f"\nrecorded in {record.dir}")
    if record.status != "completed":
        raise typer.Exit(1)


@journal_app.command("ls")
@_friendly
def journal_ls(journal: Optional[Path] = JournalOption):
    """Every run in the journal, incomplete ones included."""
    j = _journal(journal)
    frame = j.index(write=j.runs_dir.is_dir())
    if frame.empty:
        out.print(f"no runs in {j.root}")
        return
    table = Table(title=f"journal {j.root}", title_justify="left")
    for column in ("run_id", "status", "candidate", "engine", "cells", "valid_cells", "failure"):
        table.add_column(column)
    style = {"completed": "green", "failed": "red", "incomplete": "yellow"}
    for row in frame.itertuples():
        table.add_row(row.run_id, f"[{style.get(row.status, 'white')}]{row.status}[/]", str(row.candidate),
                      str(row.engine or "-"), _int(row.cells), _int(row.valid_cells), str(row.failure or "-"))
    out.print(table)


def _int(value) -> str:
    try:
        return str(int(value))
    except (TypeError, ValueError):
        return "-"


@journal_app.command("show")
@_friendly
def journal_show(run_id: str = typer.Argument(..., help="run id (a unique prefix or fragment is enough)"),
                 journal: Optional[Path] = JournalOption):
    """One run's tables, or its failure cause and log tail."""
    from .report import RunReport

    record = _journal(journal).run(run_id)
    out.print(RunReport(record))
    out.print(f"\n{record.dir}")


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
