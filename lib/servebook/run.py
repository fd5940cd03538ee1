"""One run: preflight, launch, wait ready, warm up, measure every cell, stop the engine, seal the run.

A server that never becomes ready, or dies, yields a sealed `failed` run with its classified
cause and log tail and no summary numbers. Ctrl-C (Kernel > Interrupt in Jupyter) stops the engine and
seals the run `interrupted` with the cells it finished; verdicts leave such a run out. Faults are raised
where they happen and caught once, here, where the run is sealed. The engine is always stopped before the run
is sealed, so nothing under a sealed run (its engine.log included) changes afterwards.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
import openai

from .config.candidate import Candidate
from .config.claims import Verification
from .config.parameters import Seat
from .config.plan import Plan
from .config.secrets import Scrubber, redact_argv, redact_env
from .engines import EngineAdapter, get_engine
from .engines.random_models import model_file_name
from .engines.sizing import logged_memory_check
from .journal import Journal, RunRecord, RunWriter, utc_now
from .journal.manifest import EngineInfo, Environment, Failure, GateScore, Manifest, RunIdentity, Summary
from .launch.environment import fingerprint
from .launch.preflight import ResolvedPaths, preflight
from .launch.process import AttachedEngine, Engine, EngineProcess, free_port
from .launch.verify import (
    check_tokenizer,
    launched_claims,
    read_self_report,
    read_server_info,
    select_model,
    verify_attached,
    verify_claims,
)
from .measure.endpoint import Endpoint
from .measure.equivalence import compare_outputs
from .measure.gates import gate_summary
from .measure.host import pin_engine
from .measure.log import MeasurementLog
from .measure.loop import inactive_drafter, measure_plan
from .measure.openloop import plan_of_round
from .measure.turns import NoTurns, Turns, turns_for
from .util.aio import run_blocking
from .util.errors import EngineFailed, InputError, RunInterrupted
from .util.progress import Reporter

if TYPE_CHECKING:
    from .launch.compose import ComposePlan


def _summary(log: MeasurementLog) -> Summary:
    cell_rows = log.cell_rows()
    valid = [c for c in cell_rows if c["valid"]]
    return Summary(
        cells=len(cell_rows),
        valid_cells=len(valid),
        invalid_cells={c["cell_id"]: c["invalid_reasons"] for c in cell_rows if not c["valid"]},
        invalid_codes={c["cell_id"]: c["invalid_codes"].split(",") for c in cell_rows if not c["valid"]},
        reconciled_cells=sum(1 for c in cell_rows if c["reconciliation"] == "ok"),
        decode_aggregate_tok_s={c["cell_id"]: c["aggregate_tok_s"] for c in valid if c["kind"] == "decode"},
        prefill_tok_s={c["cell_id"]: c["prefill_tok_s"] for c in valid if c["kind"] == "prefill"},
        gates={name: GateScore.model_validate(score) for name, score in gate_summary(log.gate_results).items()},
        batch_invariance=compare_outputs(log.outputs, log.outputs, "solo", "concurrent") if log.outputs else None,
        warmup_tok_s=[round(rate, 1) for rate in log.warmup.rates] if log.warmup else [],
        warmup_steady=log.warmup.steady if log.warmup else None,
    )


def _api_key(candidate: Candidate) -> str | None:
    """The key named by launch.api_key_env, read from the environment (never from a file servebook writes)."""
    name = candidate.launch.api_key_env
    if not name:
        return None
    value = os.environ.get(name)
    if not value:
        raise InputError(f"launch.api_key_env: the environment variable {name} is not set (export the key first)")
    return value


@dataclass
class _Target:
    """Where the engine will answer and what starts it, decided before the run directory exists."""

    argv: list[str]
    base_url: str
    compose_plan: ComposePlan | None = None


def _target(candidate: Candidate, adapter: EngineAdapter, paths: ResolvedPaths, api_key: str | None) -> _Target:
    launch = candidate.launch
    port = launch.port or free_port(launch.host if launch.mode == "local" else "127.0.0.1")
    if launch.mode == "attach":
        return _Target([], (launch.url or "").rstrip("/"))
    if launch.mode == "compose":
        from .launch.compose import render

        plan = render(candidate, adapter, model_path=paths.model_path, draft_path=paths.draft_path, first_port=port)
        return _Target(["docker", "compose", "-p", plan.project, "up"], f"http://127.0.0.1:{plan.host_ports[0]}",
                       plan)
    binary = None if launch.simulator else paths.engine_binary
    argv = adapter.argv(candidate, port=port, model_path=paths.model_path, draft_path=paths.draft_path,
                        binary=binary, backend=paths.backend)
    if api_key and adapter.api_key_flag:
        argv += [adapter.api_key_flag, api_key]  # launch.json and the manifest get the redacted argv
    if launch.simulator:
        argv = [sys.executable, "-m", "servebook.engines.simulator", "--flavor", candidate.engine,
                *[f"--fault={fault}" for fault in launch.sim_faults], "--", *argv]
    return _Target(argv, f"http://{launch.host}:{port}")


def _environment(candidate: Candidate, adapter: EngineAdapter, paths: ResolvedPaths) -> Environment:
    local = adapter.fingerprints_binary and not candidate.launch.simulator
    data = fingerprint(engine_binary=paths.engine_binary if local else None,
                       model_path=paths.model_path if local else None)
    data.update(paths.gpu_fingerprint)
    if not candidate.launch.simulator:
        data.update(adapter.build_fingerprint(candidate))
    data.update({"image": candidate.launch.image, "image_digest": candidate.pins.image_digest,
                 "model_revision": candidate.model.revision, "simulated": candidate.launch.simulator,
                 "preflight": paths.findings_json()})
    return Environment.model_validate(data)


def _engine(candidate: Candidate, adapter: EngineAdapter, target: _Target, writer: RunWriter) -> Engine:
    launch = candidate.launch
    if launch.mode == "attach":
        return AttachedEngine(target.base_url, adapter, writer.engine_log)
    if launch.mode == "compose":
        from .launch.compose import ComposeEngine

        assert target.compose_plan is not None
        writer.write_json("compose.json", target.compose_plan.document)
        return ComposeEngine(target.compose_plan, adapter, writer.path("compose.yaml"), writer.engine_log)
    return EngineProcess(target.argv, adapter, target.base_url, writer.engine_log,
                         env={**adapter.launch_env(candidate), **launch.env})


def _write_raw(writer: RunWriter, log: MeasurementLog) -> None:
    """Every raw table measured so far. Called after each cell too, so a run killed mid-plan keeps its
    finished cells (each file replaced atomically: whole as of the last cell, never half-written)."""
    writer.write_table("requests", log.request_rows())
    writer.write_table("chunks", log.chunk_rows())
    writer.write_table("scrapes", log.scrape_rows())
    if log.telemetry:
        writer.write_table("telemetry", log.telemetry)
    if log.outputs:
        writer.write_table("outputs", log.outputs)
    if log.outcomes:
        writer.write_table("cells", [dict(row) for row in log.cell_rows()])


def _endpoint(candidate: Candidate, adapter: EngineAdapter, engine_info: EngineInfo, writer: RunWriter,
              api_key: str | None) -> Endpoint:
    """The engine as the measurement sees it, fixed now that it answers."""
    return Endpoint(engine_info.base_url or "", adapter, model=engine_info.served_model,
                    api_key=api_key or "servebook", slots=_slots(candidate, engine_info),
                    engine_pid=engine_info.pid if candidate.launch.mode == "local" else None,
                    engine_log=writer.engine_log, request_extras=candidate.request_extras)


def _measure(engine: Engine, endpoint: Endpoint, candidate: Candidate, plan: Plan, writer: RunWriter,
             log: MeasurementLog, engine_info: EngineInfo, reporter: Reporter,
             turns: Turns | NoTurns | None = None) -> None:
    """Measure the ready engine; EngineFailed when it did not serve the plan."""

    def alive_check() -> None:
        if engine.wait_exit(2.0):  # a dying engine needs a moment to be reaped
            engine.check_alive()

    started = time.monotonic()
    try:
        run_blocking(lambda: measure_plan(endpoint, plan, log, tag=writer.run_id, alive_check=alive_check,
                                        reporter=reporter, on_cell=lambda: _write_raw(writer, log), turns=turns))
    except (OSError, httpx.HTTPError, openai.OpenAIError):
        # The engine's death explains a lost connection; its socket can close a moment before it can be reaped
        # (a vLLM killed mid-cell on an H200 refused the next connection while it still ran)
        if engine.wait_exit(2.0) or engine.exit_code() is not None:
            raise engine.failure().at("measure") from None
        raise
    engine_info.measure_s = round(time.monotonic() - started, 3)
    if engine.exit_code() is not None:
        raise engine.failure().at("measure")
    inactive_drafter(candidate.knobs.drafter.kind, endpoint.adapter, log, writer.engine_log)


def _select_model(candidate: Candidate, adapter: EngineAdapter, engine_info: EngineInfo, writer: RunWriter,
                  api_key: str | None) -> None:
    """Which of the endpoint's models to measure, and what the engine reports of the candidate's settings;
    a launched engine that does not serve the named model is a failed load (attach refused this earlier)."""
    if engine_info.served_model is not None:
        return
    base_url = engine_info.base_url or ""
    report = read_self_report(adapter, base_url, _auth_headers(api_key))
    writer.write_json("self_report.json", report.bodies)
    # the file the engine was given: llama.cpp's -m, else the candidate's model as this engine reads it (a vLLM
    # `random:1b` is the Hugging Face directory it resolves to, which is what the server reports back)
    model_file = _model_file(engine_info.argv) or model_file_name(candidate.model.path, adapter.model_format)
    claims, _ = verify_claims(candidate, report, model_file)
    if candidate.launch.mode != "attach":
        claims = launched_claims(claims, adapter, engine_info.argv)
    engine_info.verification = Verification(claims=claims, reported=report.record)
    try:
        engine_info.served_model = select_model(report, candidate.model.served_name, base_url)
    except InputError as error:
        raise EngineFailed("model_not_served", str(error), stage="launch") from None


def _model_file(argv: list[str]) -> str | None:
    """The model file a launched llama.cpp engine was given."""
    return next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-m", "--model")), None)


def _slots(candidate: Candidate, engine_info: EngineInfo) -> int | None:
    """How many requests the engine runs at once: what it reports, else what the candidate sets."""
    reported = engine_info.verification.settings if engine_info.verification else {}
    value = reported.get("max_running_requests") or candidate.knobs.max_running_requests
    return int(value) if value else None


def _auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _launch_and_measure(engine: Engine, candidate: Candidate, plan: Plan, writer: RunWriter, log: MeasurementLog,
                        engine_info: EngineInfo, environment: Environment, reporter: Reporter,
                        api_key: str | None, turns: Turns | NoTurns) -> None:
    """Start the engine, wait for it, record what it says about itself, measure; always stop it.
    EngineFailed (with its stage) when the engine did not come up or did not serve the plan."""
    adapter = get_engine(candidate.engine)
    try:
        try:
            engine.start()
            engine_info.pid = engine.pid
            with reporter.task(f"start {candidate.engine} and wait for readiness") as task:
                ready_s = engine.wait_ready(candidate.launch.ready_timeout_s, on_poll=lambda s: task.update(s))
        except EngineFailed as error:
            raise error.at("launch")
        engine_info.ready_s = round(ready_s, 3)
        if candidate.launch.cpus and engine.pid:
            engine_info.pinned = {"cpus": candidate.launch.cpus, "threads": pin_engine(engine.pid, candidate.launch.cpus)}
        engine_info.memory = logged_memory_check(adapter, _model_file(engine_info.argv), writer.engine_log)
        _select_model(candidate, adapter, engine_info, writer, api_key)
        _record_server_info(adapter, engine_info, environment, writer, api_key)
        _check_pinned_version(candidate, environment)
        # A launched server whose tokenizer servebook cannot know beforehand (a command template) is asked now;
        # an attached one was asked before anything was recorded.
        if candidate.launch.mode != "attach":
            check_tokenizer(adapter, engine_info.base_url or "", _auth_headers(api_key), engine_info.served_model,
                            plan.needs_tokenizer)
        endpoint = _endpoint(candidate, adapter, engine_info, writer, api_key)
        _measure(engine, endpoint, candidate, plan, writer, log, engine_info, reporter, turns)
    finally:
        turns.leave()  # an engine that failed to start must not hold its round's start
        engine.stop()


def _check_pinned_version(candidate: Candidate, environment: Environment) -> None:
    """A candidate pinned to an engine release must be served by that release: a gate on "the new version" that
    measured the old one would pass for the wrong reason. An engine that reports no version is not checked."""
    pinned, reported = candidate.pins.engine_version, environment.engine_version
    if pinned and reported and pinned not in reported:
        raise EngineFailed("version_mismatch", f"pins.engine_version is {pinned!r}, but the engine reports "
                                               f"{reported!r}", stage="launch")


def _record_server_info(adapter: EngineAdapter, engine_info: EngineInfo, environment: Environment,
                        writer: RunWriter, api_key: str | None) -> None:
    info = read_server_info(adapter, engine_info.base_url or "", _auth_headers(api_key))
    if not info:
        return
    writer.write_json("server_info.json", info)
    build = info.get("build_info")
    version = info.get("version") or (build if isinstance(build, str) else None)
    if version and not environment.engine_version:
        environment.engine_version = str(version)


def _start(candidate: Candidate, plan: Plan, journal: Journal, paths: ResolvedPaths, target: _Target,
           extra_manifest: dict[str, Any] | None, run_id: str | None) -> tuple[RunWriter, RunIdentity]:
    """The run's directory and its launch record: from here on the journal shows the run (incomplete until sealed)."""
    writer = journal.start_run(candidate.id, run_id, Scrubber.from_environment(candidate.launch.api_key_env))
    identity = RunIdentity.model_validate({
        "candidate_id": candidate.id, "candidate_label": candidate.label,
        "candidate": candidate.model_dump(mode="json"), "plan_id": plan.id, "plan": plan.model_dump(mode="json"),
        "started_at": utc_now(), **(extra_manifest or {})})
    writer.write_launch({**identity.model_dump(mode="json"), "argv": redact_argv(target.argv),
                         # what servebook adds for the engine (vLLM's development mode) is recorded with the rest
                         "env": redact_env({**get_engine(candidate.engine).launch_env(candidate), **candidate.launch.env}),
                         "cwd": os.getcwd(), "base_url": target.base_url})
    return writer, identity


def run_candidate(
    candidate: Candidate,
    plan: Plan,
    journal: Journal,
    *,
    reporter: Reporter | None = None,
    extra_manifest: dict[str, Any] | None = None,
    run_id: str | None = None,
    seat: Seat | None = None,
) -> RunRecord:
    """Launch `candidate`, measure `plan`, seal the run in `journal` and return it as recorded.

    `extra_manifest` adds context (the study and the name of the candidate in it);
    `run_id` lets a sweep choose the run's directory name before the notebook starts;
    `seat`: the run's place in a resident round, whose runs measure in turn (measure.turns).
    Bad input raises InputError before anything is recorded; an engine that fails yields a sealed `failed` run.
    """
    reporter = reporter or Reporter()
    adapter = get_engine(candidate.engine)
    journal.ensure_writable()
    adapter.check_plan_fits(candidate, plan)
    paths = preflight(candidate, reporter, shared=seat is not None)
    api_key = _api_key(candidate)
    target = _target(candidate, adapter, paths, api_key)
    served_model, verification = None, None
    if candidate.launch.mode == "attach":
        # Before anything is recorded: a server that is not the one the candidate describes is refused.
        served_model, verification = verify_attached(candidate, adapter, target.base_url, _auth_headers(api_key),
                                                     paths.model_path, plan.needs_tokenizer)
    turns = turns_for(seat)
    writer, identity = _start(candidate, plan, journal, paths, target,
                              {**(extra_manifest or {}), "resident": seat} if seat else extra_manifest, run_id)
    environment = _environment(candidate, adapter, paths)
    engine = _engine(candidate, adapter, target, writer)
    reporter.log(f"run {writer.run_id}: {candidate.label} ({candidate.id}) on {target.base_url}")
    log = MeasurementLog()
    engine_info = EngineInfo(argv=redact_argv(target.argv), base_url=target.base_url, served_model=served_model,
                             verification=verification)
    failure: EngineFailed | None = None
    interrupted = False
    try:
        # The run's interleaving round draws its own arrivals, the same for every candidate of the round.
        measured = plan_of_round(plan, journal.rounds_done(candidate.id, plan.id, environment.machine_key))
        _launch_and_measure(engine, candidate, measured, writer, log, engine_info, environment, reporter, api_key,
                            turns)
    except EngineFailed as error:
        failure = error
    except InputError:
        if not log.outcomes:  # bad input found once the engine answered: nothing was measured, nothing is kept
            writer.abandon()
        raise
    except KeyboardInterrupt:  # the engine is stopped already (_launch_and_measure's finally)
        interrupted = True
    _write_raw(writer, log)
    sealed = {**identity.model_dump(), "environment": environment, "engine": engine_info, "finished_at": utc_now()}
    return _seal(journal, writer, log, sealed, failure, interrupted, reporter)


def _seal(journal: Journal, writer: RunWriter, log: MeasurementLog, sealed: dict[str, Any],
          failure: EngineFailed | None, interrupted: bool, reporter: Reporter) -> RunRecord:
    """The run's manifest, last: interrupted (raised), failed, or completed with its summary."""
    if interrupted:
        raise _seal_interrupted(writer, sealed, log) from None
    if failure is not None:
        return _seal_failed(journal, writer, sealed, failure, reporter)
    if log.gate_results:
        writer.write_table("gates", [r.row() for r in log.gate_results])
    writer.seal(Manifest(**sealed, status="completed", failure=None, summary=_summary(log)))
    record = journal.run(writer.run_id)
    journal.index(write=True)
    return record


def _seal_failed(journal: Journal, writer: RunWriter, sealed: dict[str, Any], error: EngineFailed,
                 reporter: Reporter) -> RunRecord:
    """A failed run yields no figures: its raw rows stay, the cell summaries written on the way do not."""
    writer.discard_table("cells")
    stage = error.stage or "measure"
    reporter.log(f"run {writer.run_id} FAILED during {stage}: {error.cause}: {error.message}")
    writer.seal(Manifest(**sealed, status="failed", summary=None, failure=Failure(
        stage=stage, cause=error.cause, message=error.message, exit_code=error.exit_code, log_tail=error.log_tail)))
    return journal.run(writer.run_id)


def _seal_interrupted(writer: RunWriter, sealed: dict[str, Any], log: MeasurementLog) -> RunInterrupted:
    """The user stopped the run: it keeps the cells it finished, sealed as `interrupted` (no evidence for a verdict)."""
    done = len(log.outcomes)
    message = (f"run {writer.run_id} interrupted after {done} cell{'s' if done != 1 else ''}; the engine was stopped "
               "and the run sealed as interrupted, with its finished cells (verdicts leave it out)")
    writer.seal(Manifest(**sealed, status="interrupted", summary=_summary(log) if done else None, failure=Failure(
        stage="measure" if done else "launch", cause="interrupted", message=message)))
    return RunInterrupted(message, writer.run_id)  # said once, by whoever shows the interrupt
