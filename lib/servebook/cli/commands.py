"""Commands that run and judge: run, sweep, judge, site and the simulator (engine and models: cli/models.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from ..config import InputError, Plan, load_candidate, load_plan, load_study, parse_overrides, with_overrides
from ..journal import Journal
from ..util.frames import frame_records
from ..util.progress import Reporter
from ..util.terminal import markup_safe
from ._app import (
    FailOnOption,
    FormatOption,
    JournalOption,
    OutputOption,
    SiteUrlOption,
    StudySetOption,
    app,
    check_format,
    err,
    friendly,
    open_journal,
    out,
    study_runner,
    writable_output,
    writing_into,
)


@app.command("run")
@friendly
def run(
    candidate_file: Optional[Path] = typer.Argument(None, help="candidate YAML (or --url: a server already running)"),
    url: Optional[str] = typer.Option(None, "--url", help="measure the server already running at this URL (the "
                                                          "engine, model and knobs read from what it reports)"),
    engine: Optional[str] = typer.Option(None, "--engine", help="with --url: vllm, sglang, llamacpp or openai, when "
                                                                "the server's own report should not decide"),
    model: Optional[str] = typer.Option(None, "--model", help="with --url: the served model to measure, when the "
                                                              "server offers several"),
    api_key_env: Optional[str] = typer.Option(None, "--api-key-env", help="with --url: the environment variable "
                                                                          "holding the server's API key"),
    name: Optional[str] = typer.Option(None, "--name", help="with --url: the candidate's label (default: engine "
                                                            "and model)"),
    plan_file: Optional[Path] = typer.Option(None, "--plan", "-p", help="plan YAML (default: the built-in plan; "
                                                                        "with --url, the quick plan)"),
    journal: Optional[str] = JournalOption,
    set_: list[str] = typer.Option([], "--set", help="override a candidate field, e.g. knobs.chunk_size=256"),
):
    """Launch one candidate (or attach to a running server with --url), measure it, reconcile, and record the run
    in the journal."""
    from ..present import report, run_summary
    from ..run import run_candidate

    if (candidate_file is None) == (url is None):
        raise InputError("give a candidate file or --url URL (a server already running), not both or neither")
    if url is None and (engine or model or api_key_env or name):
        raise InputError("--engine, --model, --api-key-env and --name describe the server of --url; a candidate "
                         "file says them itself")
    if url is not None:
        from ..launch.discover import server_candidate
        from ..util.resources import shipped_file

        found = server_candidate(url, engine=engine, served_name=model, api_key_env=api_key_env, name=name)
        candidate = found.candidate
        err.print(f"{markup_safe(url)}: {candidate.engine} ({markup_safe(found.evidence)}), serving "
                  f"{markup_safe(candidate.model.served_name or '')}", highlight=False)
        plan = load_plan(plan_file or shipped_file("plans", "quick.yaml"))
    else:
        assert candidate_file is not None
        candidate = load_candidate(candidate_file)
        plan = load_plan(plan_file)
    if set_:
        candidate = with_overrides(candidate, parse_overrides(set_))
    record = run_candidate(candidate, plan, open_journal(journal, create=True), reporter=Reporter())
    # a server measured from its URL gets the one-screen summary its user came for; a candidate file, every table
    out.print(report(record) if url is None else run_summary(record, f" --journal {journal}" if journal else ""))
    out.print(f"\nrecorded in {record.dir}")
    if record.status != "completed":
        raise typer.Exit(1)


@app.command("capacity")
@friendly
def capacity_cmd(
    candidate_file: Path = typer.Argument(..., help="candidate YAML"),
    slo: str = typer.Option(..., "--slo", help="objectives per request, e.g. ttft_s=2,tpot_s=0.05,attainment=0.9"),
    plan_file: Optional[Path] = typer.Option(None, "--plan", "-p", help="a plan whose load section gives arrivals "
                                                                         "and lengths (default: Poisson, 256-token "
                                                                         "prompts, 64-token outputs)"),
    low: Optional[float] = typer.Option(None, help="the first rate probed (requests/s; default: the plan's, or 1)"),
    high: Optional[float] = typer.Option(None, help="the highest rate probed (default: the plan's, or 1024)"),
    precision_pct: Optional[float] = typer.Option(None, help="stop when the bracket is this narrow (default 5)"),
    max_probes: Optional[int] = typer.Option(None, help="probes at most (default 12)"),
    probe_s: Optional[float] = typer.Option(None, help="each probe's measured window in seconds"),
    min_requests: Optional[int] = typer.Option(None, help="arrivals each bracketing probe holds at least (default 50)"),
    narrowing_requests: Optional[int] = typer.Option(None, help="arrivals each probe inside the bracket holds at "
                                                                "least (default 800; near the capacity, short "
                                                                "windows miss the bursts that decide it)"),
    journal: Optional[str] = JournalOption,
):
    """The highest request rate at which a candidate meets its objectives: open-loop probes in one launch,
    doubling then bisecting, read back through a monotone fit; the run is recorded like any other. Exits 1 when
    the objectives hold at no probed rate."""
    from ..config import validate
    from ..config.metrics import measured_by
    from ..measure.kinds.capacity.search import describe_capacity
    from ..measure.kinds.capacity.search import figure as capacity_figure
    from ..run import run_candidate

    objectives = parse_overrides([part for part in slo.split(",") if part.strip()], "--slo")
    base = load_plan(plan_file).model_dump(mode="json", exclude_none=True) if plan_file else {}
    # The flags given override the plan's capacity section field by field; a flag left out keeps the plan's value
    # (replacing the whole section with the flags' defaults silently measured another search than the plan's).
    flags = {"low_rps": low, "high_rps": high, "max_probes": max_probes, "precision_pct": precision_pct,
             "probe_s": probe_s, "min_requests": min_requests, "narrowing_requests": narrowing_requests}
    search = {**(base.get("capacity") or {}), **{k: v for k, v in flags.items() if v is not None}}
    plan = validate(Plan, {**base, "decode": None, "prefill": None, "load": base.get("load") or {},
                           "slo": objectives, "capacity": search}, "capacity (the flags over the plan)")
    record = run_candidate(load_candidate(candidate_file), plan, open_journal(journal, create=True),
                           reporter=Reporter())
    cells = record.table("cells") if record.status == "completed" else None
    capacity = cells[cells["kind"] == measured_by("capacity_rps")] if cells is not None else None
    row = None if capacity is None else next(iter(frame_records(capacity)), None)
    if row is None:  # a failed load, or an engine that died mid-search: the report says which
        from ..present import report

        out.print(report(record))
        raise typer.Exit(1)
    out.print(f"{record.candidate_label}: {describe_capacity(row, plan.slo.describe() if plan.slo else '')}\n"
              f"recorded in {record.dir}", highlight=False)
    if capacity_figure(row, "capacity_rps") is None:  # holding no load is not a capacity: a script must see it
        raise typer.Exit(1)


@app.command("sweep")
@friendly
def sweep_cmd(
    study_file: Path = typer.Argument(..., help="study YAML (data/studies/*.yaml)"),
    journal: Optional[str] = JournalOption,
    dry_run: bool = typer.Option(False, "--dry-run", help="print every engine command line; touch nothing"),
    retry_failed: bool = typer.Option(False, help="run again candidates whose recorded run failed"),
    kernel: str = typer.Option("python3", help="Jupyter kernel name for papermill"),
    execution_timeout: int = typer.Option(3600, help="seconds one notebook cell may run"),
    until_decided: bool = typer.Option(False, "--until-decided",
                                       help="add repeats where verdicts are inconclusive, interleaved, until decided"),
    max_repeats: int = typer.Option(10, "--max-repeats", min=1, help="with --until-decided: runs per candidate at most"),
    parallel: str = typer.Option("1", "--parallel", help="auto (or N): candidates at once on disjoint GPU groups "
                                                          "(tensor_parallel_size each); serial on hosts without GPUs"),
    gpus: Optional[str] = typer.Option(None, "--gpus", help="with --parallel: the GPU indices to share out "
                                                             "(default: every GPU nvidia-smi lists)"),
    ray: Optional[str] = typer.Option(None, "--ray", help="a Ray cluster address (auto, ray://host:10001): each "
                                                           "candidate run becomes a Ray task asking for its GPUs"),
    time_budget: Optional[float] = typer.Option(None, "--time-budget", min=1, help="seconds: start no run that the time "
                                                "left cannot hold (a lent machine's limit); a later sweep resumes"),
    resident: bool = typer.Option(False, "--resident", help="launch each round's candidates at once on this machine "
                                  "and measure them in turn, cell by cell: the host's drift falls on all alike"),
    seats: Optional[int] = typer.Option(None, "--seats", min=2, help="--resident, N engines at once (default: 1 each)"),
    fail_on: Optional[str] = FailOnOption, verdict_format: str = FormatOption, output: Optional[Path] = OutputOption,
    site_url: Optional[str] = SiteUrlOption, set_: list[str] = StudySetOption,
):
    """Run notebooks/qualify.ipynb once per candidate of a study, then judge every run."""
    from ..present import DryRunView
    from ..sweeps import SweepOptions, sweep
    from ..sweeps.options import parse_gpus, parse_parallel

    study = load_study(study_file, parse_overrides(set_) if set_ else None)
    _check_fail_on(fail_on, verdict_format)
    writable_output(output)  # before the runs, not after hours of them
    if dry_run:
        from ..sweeps.dryrun import planned

        given = Journal(journal or os.environ.get("SERVEBOOK_JOURNAL") or "journal")
        plan = planned(study, given if given.exists else None)
        out.print(DryRunView(plan.entries, study.plan.id, plan), soft_wrap=True)
        return
    j = open_journal(journal, create=True).ensure_writable()
    # One orchestration whatever runs the runs: an option the runner cannot honour is refused there, by its flag.
    options = SweepOptions(retry_failed=retry_failed, max_repeats=max_repeats if until_decided else None,
                           parallel=parse_parallel(parallel), gpus=parse_gpus(gpus), time_budget_s=time_budget,
                           resident=resident, seats=seats)
    results = sweep(study, j, options, runner=study_runner(ray, kernel, execution_timeout), reporter=Reporter())
    ran = sum(1 for r in results if r.status != "skipped")
    (out if verdict_format == "text" else err).print(f"\n{ran} runs made, {len(results) - ran} skipped (already recorded). "
              f"Results: {j.location}/runs; compare them with `servebook journal ls --journal {j.location}` "
              f"or notebooks/compare.ipynb (study_path={study_file}).")
    _verdicts_out(study, j, verdict_format, output, fail_on, site_url, record=True)


@app.command("judge")
@friendly
def judge_cmd(
    study_file: Path = typer.Argument(..., help="study YAML whose verdict rules to apply"),
    journal: Optional[str] = JournalOption,
    fail_on: Optional[str] = FailOnOption, verdict_format: str = FormatOption, output: Optional[Path] = OutputOption,
    site_url: Optional[str] = SiteUrlOption, set_: list[str] = StudySetOption,
    record: bool = typer.Option(False, "--record", help="append changed verdicts to the journal as a sweep does (what "
                                                         "the site and `journal ls` show); without it judge only reads"),
):
    """Re-judge a study's recorded runs under its current rules, without running anything."""
    study = load_study(study_file, parse_overrides(set_) if set_ else None)
    _check_fail_on(fail_on, verdict_format)
    j = open_journal(journal).ensure_writable() if record else open_journal(journal)
    _verdicts_out(study, j, verdict_format, writable_output(output), fail_on, site_url, record=record)


def _check_fail_on(fail_on: Optional[str], verdict_format: str) -> None:
    """Refuse a misspelled outcome or format before anything runs."""
    from ..present.outputs import output_names
    from ..verdicts import parse_fail_on

    parse_fail_on(fail_on)
    check_format(verdict_format, ("text", *output_names()))


def _verdicts_out(study, j: Journal, verdict_format: str, output: Optional[Path], fail_on: Optional[str],
                  site_url: Optional[str], record: bool) -> None:
    """The verdicts in the chosen format (to stdout or --output), the Markdown summary appended to
    $GITHUB_STEP_SUMMARY when it is set, and the gate's exit status; `record`: changed verdicts appended."""
    from ..present import VerdictsView
    from ..present.outputs import output_named, report_of_judged
    from ..present.outputs.as_markdown import write_step_summary
    from ..util.render import to_text
    from ..verdicts import gate, judge, noise_floor, parse_fail_on

    judged = judge(study, j, append=record)
    result = gate(judged, parse_fail_on(fail_on))
    if unrecorded := [item.entry.name for item in judged if item.verdict is not None and not item.recorded]:
        err.print(f"not recorded: the journal holds older verdicts for {', '.join(unrecorded)} (the site and `journal "
                  "ls` show those); `servebook judge --record` appends these", highlight=False)
    site_url = site_url or os.environ.get("SERVEBOOK_SITE_URL")
    view = lambda: VerdictsView(judged, noise_floor(study, j, judged))
    # the noise floor is measured only for a format that writes it (the terminal's tables, plain)
    chosen = None if verdict_format == "text" else output_named(verdict_format)
    report = report_of_judged(study, judged, result, tuple(noise_floor(study, j, judged)) if chosen and chosen.noise
                              else ())

    def text() -> str:
        if chosen is None:  # "text": the tables as the terminal shows them, without colour (--output)
            return to_text(view().blocks(), width=120)
        return chosen.text(report, site_url)

    if output is None and verdict_format == "text":
        out.print(view())
    elif output is None:
        print(text(), end="")
    # An output that cannot be written is said, and the gate's exit code still decides: a job must not read
    # "servebook crashed" (exit 1) where the study was rejected (exit 10).
    lost = False
    if output is not None:
        try:
            output.write_text(text(), encoding="utf-8")
            err.print(f"{verdict_format} verdicts written to {output}")
        except OSError as error:
            lost = True
            err.print(f"[bold red]error:[/] --output {markup_safe(output)}: cannot write it "
                      f"({markup_safe(error.strerror or error)})", markup=True, highlight=False)
    try:
        if os.environ.get("GITHUB_STEP_SUMMARY"):
            summary = write_step_summary(output_named("markdown").text(report, site_url))
            err.print(f"summary appended to {summary}")
    except OSError as error:  # a courtesy to the reader of the job, not what the job decides on
        err.print(f"[yellow]warning:[/] $GITHUB_STEP_SUMMARY: cannot append to "
                  f"{markup_safe(os.environ.get('GITHUB_STEP_SUMMARY'))} ({markup_safe(error.strerror or error)})",
                  markup=True, highlight=False)
    if result.fail_on:
        (err if verdict_format != "text" else out).print(result.describe(), highlight=False)
    if not result.passed:
        raise typer.Exit(result.exit_code)
    if lost:
        raise typer.Exit(1)


@app.command("site")
@friendly
def site_cmd(
    journal: Optional[str] = JournalOption,
    out_dir: Path = typer.Option(Path("site"), "--out", "-o", help="output directory"),
):
    """Render the journal as a static site (works from file://, no network; incremental)."""
    from ..present import build_site

    j = open_journal(journal)
    if not j.runs_dir.is_dir():
        raise InputError(f"journal: no runs in {j.location} (run `servebook sweep` or `servebook run` first)")
    with writing_into(out_dir):
        report = build_site(j, out_dir, reporter=Reporter())
    out.print(f"{report}\nopen file://{out_dir.resolve() / 'index.html'}", highlight=False, soft_wrap=True)


@app.command("sim", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def sim_cmd(
    ctx: typer.Context,
    flavor: str = typer.Option(..., help="llamacpp, sglang or vllm: whose API, readiness and counters to mimic"),
    fault: list[str] = typer.Option([], help="inject a fault: never_ready, crash_mid_stream, oom_warmup, "
                                             "wrong_usage, null_string_argument, compile_in_cell, idle_poll "
                                             "(and the gates' faults: servebook.simulator.FAULTS)"),
    port: Optional[int] = typer.Option(None, help="port, when no engine argv follows --"),
):
    """Serve a simulated engine (a test double: timing model, no model). Engine flags may follow --."""
    from ..simulator import main as simulator_main

    argv = ["--flavor", flavor, *[f"--fault={f}" for f in fault]]
    if port is not None:
        argv += ["--port", str(port)]
    if ctx.args:
        argv += ["--", *ctx.args]
    simulator_main(argv)
