"""The `servebook` command: a thin shell that turns arguments into models and calls the library."""

from __future__ import annotations

import os
import sys
from functools import wraps
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from .config import InputError, load_candidate, load_plan, load_study, parse_overrides, with_overrides
from .engines.llamacpp_build import EngineInstallError, find_llamacpp, install_llamacpp
from .journal import Journal
from .util.progress import Reporter

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
    from .engines.tiny_models import ensure_tiny_models

    for name, path in ensure_tiny_models(reporter=Reporter()).items():
        out.print(f"tiny:{name}  {path}  ({path.stat().st_size / 1e6:.0f} MB)")


@app.command("run")
@_friendly
def run(
    candidate_file: Path = typer.Argument(..., help="candidate YAML"),
    plan_file: Optional[Path] = typer.Option(None, "--plan", "-p", help="plan YAML (default: the built-in plan)"),
    journal: Optional[Path] = JournalOption,
    set_: list[str] = typer.Option([], "--set", help="override a candidate field, e.g. knobs.chunk_size=256"),
):
    """Launch one candidate, measure it, reconcile, and record the run in the journal."""
    from .present import report
    from .run import run_candidate

    candidate = load_candidate(candidate_file)
    if set_:
        candidate = with_overrides(candidate, parse_overrides(set_))
    plan = load_plan(plan_file)
    record = run_candidate(candidate, plan, _journal(journal), reporter=Reporter())
    out.print(report(record))
    out.print(f"\nrecorded in {record.dir}")
    if record.status != "completed":
        raise typer.Exit(1)


@app.command("sweep")
@_friendly
def sweep_cmd(
    study_file: Path = typer.Argument(..., help="study YAML (data/studies/*.yaml)"),
    journal: Optional[Path] = JournalOption,
    dry_run: bool = typer.Option(False, "--dry-run", help="print every engine command line; touch nothing"),
    retry_failed: bool = typer.Option(False, help="run again candidates whose recorded run failed"),
    kernel: str = typer.Option("python3", help="Jupyter kernel name for papermill"),
    execution_timeout: int = typer.Option(3600, help="seconds one notebook cell may run"),
    until_decided: bool = typer.Option(False, "--until-decided",
                                       help="add repeats where verdicts are inconclusive, interleaved, until decided"),
    max_repeats: int = typer.Option(10, "--max-repeats", min=1, help="with --until-decided: runs per candidate at most"),
):
    """Run notebooks/qualify.ipynb once per candidate of a study, then judge every run."""
    from .present import DryRunView, VerdictsView
    from .sweeps import dry_run as plan_dry_run
    from .sweeps import sweep
    from .verdicts import judge, noise_floor

    study = load_study(study_file)
    if dry_run:
        out.print(DryRunView(plan_dry_run(study), study.plan.id), soft_wrap=True)
        return
    j = _journal(journal).ensure_writable()
    results = sweep(study, j, reporter=Reporter(), retry_failed=retry_failed, kernel_name=kernel,
                    execution_timeout=execution_timeout, max_repeats=max_repeats if until_decided else None)
    out.print(VerdictsView(judge(study, j), noise_floor(study, j)))
    ran = sum(1 for r in results if r.status != "skipped")
    out.print(f"\n{ran} runs made, {len(results) - ran} skipped (already recorded). "
              f"Results: {j.root}/runs; compare them with `servebook journal ls --journal {j.root}` "
              f"or notebooks/compare.ipynb (study_path={study_file}).")


@app.command("judge")
@_friendly
def judge_cmd(
    study_file: Path = typer.Argument(..., help="study YAML whose verdict rules to apply"),
    journal: Optional[Path] = JournalOption,
):
    """Re-judge a study's recorded runs under its current rules, without running anything."""
    from .present import VerdictsView
    from .verdicts import judge, noise_floor

    study, j = load_study(study_file), _journal(journal)
    out.print(VerdictsView(judge(study, j), noise_floor(study, j)))


@app.command("site")
@_friendly
def site_cmd(
    journal: Optional[Path] = JournalOption,
    out_dir: Path = typer.Option(Path("site"), "--out", "-o", help="output directory"),
):
    """Render the journal as a static site (works from file://, no network; incremental)."""
    from .present import build_site

    j = _journal(journal)
    if not j.runs_dir.is_dir():
        raise InputError(f"journal: no runs in {j.root} (run `servebook sweep` or `servebook run` first)")
    report = build_site(j, out_dir, reporter=Reporter())
    out.print(f"{report}\nopen file://{out_dir.resolve() / 'index.html'}", highlight=False, soft_wrap=True)


@app.command("sim", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def sim_cmd(
    ctx: typer.Context,
    flavor: str = typer.Option(..., help="llamacpp, sglang or vllm: whose API, readiness and counters to mimic"),
    fault: list[str] = typer.Option([], help="inject a fault: never_ready, crash_mid_stream, oom_warmup, "
                                             "wrong_usage, null_string_argument, compile_in_cell"),
    port: Optional[int] = typer.Option(None, help="port, when no engine argv follows --"),
):
    """Serve a simulated engine (a test double: timing model, no model). Engine flags may follow --."""
    from .engines.simulator import main as simulator_main

    argv = ["--flavor", flavor, *[f"--fault={f}" for f in fault]]
    if port is not None:
        argv += ["--port", str(port)]
    if ctx.args:
        argv += ["--", *ctx.args]
    simulator_main(argv)


@journal_app.command("ls")
@_friendly
def journal_ls(journal: Optional[Path] = JournalOption):
    """Every run in the journal, incomplete ones included."""
    j = _journal(journal)
    if not j.run_ids():
        out.print(f"no runs in {j.root}")
        return
    j.index()  # keep index.parquet in step with the manifests
    out.print(j)


@journal_app.command("show")
@_friendly
def journal_show(run_id: str = typer.Argument(..., help="run id (a unique prefix or fragment is enough)"),
                 journal: Optional[Path] = JournalOption):
    """One run's tables, or its failure cause and log tail."""
    from .present import report

    record = _journal(journal).run(run_id)
    out.print(report(record))
    out.print(f"\n{record.dir}")


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
