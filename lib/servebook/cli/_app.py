"""The typer apps, consoles, shared options and the error handling every command shares."""

from __future__ import annotations

import os
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import typer
import typer.rich_utils

from ..config import InputError
from ..engines.llamacpp_build import EngineInstallError
from ..journal import Journal
from ..util.errors import DiskFull, EngineFailed, RunInterrupted, ServebookError
from ..util.files import disk_full
from ..util.terminal import make_console, markup_safe, output_width

app = typer.Typer(help="Qualify LLM serving configurations; keep every run in a journal.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
engine_app = typer.Typer(help="The embedded default engine (llama.cpp's llama-server).", no_args_is_help=True)
models_app = typer.Typer(help="Generated models for tests and demos.", no_args_is_help=True)
journal_app = typer.Typer(help="Read the journal; tag, note and archive its runs.", no_args_is_help=True)
app.add_typer(engine_app, name="engine")
app.add_typer(models_app, name="models")
app.add_typer(journal_app, name="journal")

def _print_version(asked: bool) -> None:
    if asked:
        from .._version import __version__

        print(f"servebook {__version__}")
        raise typer.Exit()


@app.callback()
def _options(version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                          help="print servebook's version and exit")) -> None:
    """Qualify LLM serving configurations; keep every run in a journal."""


out = make_console()
err = make_console(stderr=True, soft_wrap=True)  # a message is one line, however long: grep finds it
if not os.environ.get("TERMINAL_WIDTH"):  # typer's own setting wins; otherwise `--help` follows the width rule
    typer.rich_utils.MAX_WIDTH = output_width()

JournalOption = typer.Option(
    None, "--journal", "-j", help="journal directory or fsspec URL such as s3://bucket/prefix "
                                  "(default: $SERVEBOOK_JOURNAL or ./journal)"
)


FailOnOption = typer.Option(
    None, "--fail-on", help="outcomes that fail the command: rejected,failed,inconclusive,missing (comma-separated); "
                            "exit 10 rejected, 11 failed, 12 inconclusive, 13 missing (the first that applies)")
FormatOption = typer.Option("text", "--format", help="text (tables), or a verdict output (servebook.present.outputs): "
                                                     "json, csv (one row per judged cell), junit, markdown (a "
                                                     "pull-request summary) or plain (aligned columns, one line per "
                                                     "candidate)")
OutputOption = typer.Option(None, "--output", "-o", help="write the --format output to this file instead of stdout")
StudySetOption = typer.Option([], "--set", help="change a field of the study's base candidate, and so of every "
                                               "candidate, e.g. pins.engine_version=b4600 (repeatable)")
SiteUrlOption = typer.Option(None, "--site-url", help="where the journal's site is published: the Markdown links "
                                                      "candidates to their pages (default: $SERVEBOOK_SITE_URL)")


#: the formats of every command that lists (journal ls, history, compare)
LISTING_FORMATS = ("text", "plain", "csv", "json")


def listing_format_option(json_is: str) -> Any:
    return typer.Option("text", "--format", help="text (tables fitted to the terminal; 120 columns when piped), "
                                                 "plain (aligned columns, one line per row, no box drawing), csv, "
                                                 f"or json ({json_is})")


def check_format(value: str, formats: tuple[str, ...] = LISTING_FORMATS) -> str:
    """`value` if it is one of `formats`; a misspelled one names the close format."""
    if value not in formats:
        from ..util.suggest import unknown

        raise unknown("--format", value, formats)
    return value


check_listing_format = check_format


def print_listing(listing_format: str, blocks: Callable[[], list], data: Callable[[], Any],
                  csv: Callable[[], str] | None = None) -> None:
    """What a listing command prints in its `--format`: `blocks` drawn as tables (text), aligned columns (plain)
    or CSV (unless `csv` says otherwise); `data` as JSON."""
    import json

    from ..util.render import to_csv, to_plain, to_rich

    check_listing_format(listing_format)
    if listing_format == "json":
        print(json.dumps(data(), indent=2, default=str))
    elif listing_format == "csv":
        print(csv() if csv is not None else to_csv(blocks()), end="")
    elif listing_format == "plain":
        print(to_plain(blocks()), end="")
    else:
        out.print(to_rich(blocks()))


def writable_output(path: Optional[Path], flag: str = "--output") -> Optional[Path]:
    """`path`, checked before anything runs: its folder made, and a file there writable. A sweep or a search that
    learnt only at its end that its output cannot be written lost the output, and the gate its exit code."""
    if path is None:
        return None
    import tempfile

    try:
        if path.is_dir():
            raise InputError(f"{flag} {path}: is a folder; name a file in it")
        path.parent.mkdir(parents=True, exist_ok=True)
        tempfile.NamedTemporaryFile(dir=path.parent, prefix=".probe-").close()
        if path.exists() and not os.access(path, os.W_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as error:
        raise InputError(f"{flag} {path}: cannot write it ({error.strerror or error})") from None
    return path


def writable_folder(path: Path, flag: str = "--out") -> Path:
    """`path` made (with its parents) and checked writable before anything is built: a path under a file, a file,
    or a folder this user cannot write is one line and exit 2, not a traceback halfway through."""
    import tempfile

    try:
        if path.exists() and not path.is_dir():
            raise InputError(f"{flag} {path}: is a file, not a folder; name a folder")
        path.mkdir(parents=True, exist_ok=True)
        tempfile.NamedTemporaryFile(dir=path, prefix=".probe-").close()
    except OSError as error:
        raise InputError(f"{flag} {path}: cannot write there ({error.strerror or error})") from None
    return path


@contextmanager
def writing_into(path: Path, flag: str = "--out") -> Iterator[Path]:
    """`path` checked writable first (writable_folder); an OSError under it while writing (the folder removed) is one
    line and exit 2 too, and so is a full disk, which a failed write() does not name: `path` is where it wrote.
    Other errors elsewhere (reading the journal) are not this flag's."""
    writable_folder(path, flag)
    try:
        yield path
    except OSError as error:
        full = disk_full(error, error.filename or path)
        if full is not None:
            raise full from error
        if not error.filename or not Path(str(error.filename)).resolve().is_relative_to(path.resolve()):
            raise
        raise InputError(f"{flag} {path}: cannot write there ({error.strerror or error}: {error.filename})") from None


def open_journal(path: Optional[str], *, create: bool = False) -> Journal:
    """The journal a command names (--journal, $SERVEBOOK_JOURNAL, ./journal); one that does not exist is an error
    unless the command creates it."""
    journal = Journal(path or os.environ.get("SERVEBOOK_JOURNAL") or "journal")
    return journal if create else journal.require()


#: exit codes by error kind (any other ServebookError exits 1)
EXIT_CODES: dict[type[ServebookError], tuple[int, str]] = {
    # DiskFull before EngineFailed, its base: a run it fills is sealed failed, a command it stops exits 2
    InputError: (2, "error"), DiskFull: (2, "error"), EngineInstallError: (3, "engine install failed"),
    EngineFailed: (4, "engine failed"),
}


def study_runner(ray: Optional[str], kernel: str, execution_timeout: int) -> Any:
    """What runs a sweep's or a search's runs: Ray tasks on the cluster at `--ray ADDRESS` (connected when the
    orchestration has checked the options), else papermill on this machine's kept kernels."""
    settings: dict[str, Any] = {"kernel_name": kernel, "execution_timeout": execution_timeout}
    if ray:
        from ..distributed import RayRunner

        return RayRunner(settings, address=ray)
    from ..sweeps import PapermillRunner

    return PapermillRunner(**settings)


def friendly(fn):
    """One clear message and a non-zero exit for anything servebook reports, instead of a traceback."""

    @wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (ServebookError, OSError) as caught:
            # a full disk is said the same wherever a command meets it: one line, naming the file where it can
            error = caught if isinstance(caught, ServebookError) else disk_full(caught, None)
            if error is None:
                raise
            code, label = next((v for kind, v in EXIT_CODES.items() if isinstance(error, kind)), (1, "error"))
            err.print(f"[bold red]{label}:[/] {markup_safe(error)}", markup=True, highlight=False)
            raise typer.Exit(code) from caught
        except KeyboardInterrupt as interrupt:
            # what became of the run that was going, where one was (RunInterrupted); no claim where none is known
            said = str(interrupt) if isinstance(interrupt, RunInterrupted) else "stopped by Ctrl-C"
            err.print(f"[yellow]interrupted[/]: {markup_safe(said)}", markup=True, highlight=False)
            raise typer.Exit(130) from interrupt

    return wrapper
