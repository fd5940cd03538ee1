"""One run: preflight, launch, wait ready, warm up, measure every cell, stop the engine, seal the run.

A server that never becomes ready, or dies, yields a sealed `failed` run with its classified
cause and log tail and no summary numbers. Ctrl-C (Kernel > Interrupt in Jupyter) stops the engine and
seals the run `interrupted` with the cells it finished; verdicts leave such a run out. Faults are raised
where they happen and caught once, here, where the run is sealed. The engine is always stopped before the run
is sealed, so nothing under a sealed run (its engine.log included) changes afterwards.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from .config.candidate import Candidate
from .config.claims import Verification
from .config.parameters import Seat
from .config.plan import Plan
from .config.secrets import Scrubber, redact_argv, redact_env
from .engines import EngineAdapter, get_engine
from .engines.http_client import TRANSPORT_ERRORS, engine_error
from .engines.random_models import model_file_name
from .engines.sizing import logged_memory_check
from .journal import Journal, RunRecord, RunWriter, utc_now
from .journal.manifest import EngineInfo, Environment, Failure, Manifest, RunIdentity, Summary
from .launch.environment import fingerprint
from .launch.preflight import ResolvedPaths, preflight
from .launch.process import AttachedEngine, Engine, EngineProcess
from .launch.replicas import replica_record, replica_set
from .launch.target import Target, api_key_of, target_for
from .launch.verify import (
    check_tokenizer,
    launched_claims,
    read_self_report,
    read_server_info,
    select_model,
    verify_attached,
    verify_claims,
)
from .measure.drafter_watch import drafter_watch, inactive_drafter
from .measure.endpoint import Endpoint
from .measure.host import pin_engine
from .measure.log import MeasurementLog
from .measure.loop import measure_plan
from .measure.openloop import plan_of_round
from .measure.replicas import describe_losses
from .measure.turns import NoTurns, RoundStopped, Turns, turns_for
from .util.aio import run_blocking
from .util.errors import DiskFull, EngineFailed, InputError, RunInterrupted
from .util.progress import Reporter


def _environment(candidate: Candidate, adapter: EngineAdapter, paths: ResolvedPaths, lane: str | None) -> Environment:
    local = adapter.fingerprints_binary and not candidate.launch.simulator
    data = fingerprint(engine_binary=paths.engine_binary if local else None,
                       model_path=paths.model_path if local else None, lane=lane, reference=candidate.model.path)
    data.update(paths.gpu_fingerprint)
    if not candidate.launch.simulator:
        data.update(adapter.build_fingerprint(candidate))
    data.update({"image": candidate.launch.image, "image_digest": candidate.pins.image_digest,
                 "model_revision": candidate.model.revision, "simulated": candidate.launch.simulator,
                 "preflight": paths.findings_json()})
    return Environment.model_validate(data)


def _engine(candidate: Candidate, adapter: EngineAdapter, target: Target, writer: RunWriter,
            headers: dict[str, str]) -> Engine:
    launch = candidate.launch
    if launch.mode == "attach":
        return AttachedEngine(target.base_url, adapter, writer.engine_log)
    if launch.mode == "compose":
        from .launch.compose import ComposeEngine

        assert target.compose_plan is not None
        writer.write_json("compose.json", target.compose_plan.document)
        return ComposeEngine(target.compose_plan, adapter, writer.path("compose.yaml"), writer.engine_log)
    if target.replicas is not None:
        return replica_set(target.replicas, candidate, adapter, writer.engine_log.parent,
                           env={**adapter.launch_env(candidate), **launch.env}, headers=headers,
                           scrubber=writer.scrubber)
    return EngineProcess(target.argv, adapter, target.base_url, writer.engine_log,
                         env={**adapter.launch_env(candidate), **launch.env}, scrubber=writer.scrubber)


def _auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


@dataclass
class RunContext:
    """One run, from the checks before anything is recorded to its sealed record: what every stage shares, and the
    stages as methods (`begin`, then `execute`: launch, identify, measure; then `seal`)."""

    candidate: Candidate
    plan: Plan
    journal: Journal
    reporter: Reporter
    adapter: EngineAdapter
    api_key: str | None
    target: Target
    turns: Turns | NoTurns
    writer: RunWriter
    identity: RunIdentity
    environment: Environment
    engine: Engine
    engine_info: EngineInfo
    #: the plan as this run measures it: its interleaving round draws its own arrivals, the same for the whole round
    measured: Plan
    log: MeasurementLog = field(default_factory=MeasurementLog)

    @classmethod
    def begin(cls, candidate: Candidate, plan: Plan, journal: Journal, reporter: Reporter, *,
              extra_manifest: dict[str, Any] | None = None, run_id: str | None = None, seat: Seat | None = None,
              lane: str | None = None) -> "RunContext":
        """Bad input refused (InputError) before anything is recorded; then the run's directory and its launch
        record: from here on the journal shows the run (incomplete until sealed)."""
        adapter = get_engine(candidate.engine)
        journal.ensure_writable()
        adapter.check_plan_fits(candidate, plan)
        paths = preflight(candidate, reporter, shared=seat is not None)
        api_key = api_key_of(candidate)
        target = target_for(candidate, adapter, paths, api_key)
        served_model, verification = None, None
        if candidate.launch.mode == "attach":
            # Before anything is recorded: a server that is not the one the candidate describes is refused.
            served_model, verification = verify_attached(candidate, adapter, target.base_url, _auth_headers(api_key),
                                                         paths.model_path, plan.needs_tokenizer)
        turns = turns_for(seat)
        writer = journal.start_run(candidate.id, run_id, Scrubber.from_environment(candidate.launch.api_key_env))
        identity = RunIdentity.model_validate({
            "candidate_id": candidate.id, "candidate_label": candidate.label,
            "candidate": candidate.model_dump(mode="json"), "plan_id": plan.id, "plan": plan.model_dump(mode="json"),
            "started_at": utc_now(), **(extra_manifest or {}), **({"resident": seat} if seat else {})})
        writer.write_launch({**identity.model_dump(mode="json"), "argv": redact_argv(target.argv),
                             # what servebook adds for the engine (vLLM's development mode) is recorded with the rest
                             "env": redact_env({**adapter.launch_env(candidate), **candidate.launch.env}),
                             "cwd": os.getcwd(), "base_url": target.base_url,
                             **(target.replicas.record(redact_argv) if target.replicas else {})})
        environment = _environment(candidate, adapter, paths, lane)
        engine = _engine(candidate, adapter, target, writer, _auth_headers(api_key))
        reporter.log(f"run {writer.run_id}: {candidate.label} ({candidate.id}) on {target.base_url}")
        info = EngineInfo(argv=redact_argv(target.argv), base_url=target.base_url, served_model=served_model,
                          verification=verification)
        measured = plan_of_round(plan, journal.rounds_done(candidate.id, plan.id, environment.machine_key))
        return cls(candidate, plan, journal, reporter, adapter, api_key, target, turns, writer, identity,
                   environment, engine, info, measured)

    @property
    def headers(self) -> dict[str, str]:
        return _auth_headers(self.api_key)

    def execute(self) -> None:
        """Start the engine, wait for it, record what it says about itself, measure; always stop it.
        EngineFailed (with its stage) when the engine did not come up or did not serve the plan."""
        try:
            self.launch()
            self.identify()
            self.measure()
        finally:
            self.turns.leave()  # an engine that failed to start must not hold its round's start
            self.engine.stop()

    def launch(self) -> None:
        """The engine started and ready (EngineFailed at stage launch otherwise), pinned, its memory checked."""
        candidate, engine, info = self.candidate, self.engine, self.engine_info
        try:
            engine.start()
            info.pid = engine.pid
            with self.reporter.task(f"start {candidate.engine} and wait for readiness") as task:
                ready_s = engine.wait_ready(candidate.launch.ready_timeout_s, on_poll=lambda s: task.update(s))
        except EngineFailed as error:
            error.at("launch")
            raise
        info.ready_s = round(ready_s, 3)
        if candidate.launch.cpus and engine.pid:
            info.pinned = {"cpus": candidate.launch.cpus, "threads": pin_engine(engine.pid, candidate.launch.cpus)}
        info.memory = logged_memory_check(self.adapter, self.adapter.model_file(info.argv), self.writer.engine_log)

    def identify(self) -> None:
        """Which model the engine serves and what it reports of itself, checked against the candidate."""
        try:
            self.select_model()
            self.record_server_info()
        except DiskFull as full:  # no room to record what the engine reports of itself: the run stopped at launch
            full.at("launch")
            raise
        self.check_pinned_version()
        # A launched server whose tokenizer servebook cannot know beforehand (a command template) is asked now;
        # an attached one was asked before anything was recorded.
        if self.candidate.launch.mode != "attach":
            check_tokenizer(self.adapter, self.engine_info.base_url or "", self.headers,
                            self.engine_info.served_model, self.plan.needs_tokenizer)

    def select_model(self) -> None:
        """Which of the endpoint's models to measure, and what the engine reports of the candidate's settings;
        a launched engine that does not serve the named model is a failed load (attach refused this earlier)."""
        candidate, adapter, info = self.candidate, self.adapter, self.engine_info
        if info.served_model is not None:
            return
        base_url = info.base_url or ""
        report = read_self_report(adapter, base_url, self.headers)
        self.writer.write_json("self_report.json", report.bodies)
        # the file the engine was given: llama.cpp's -m, else the candidate's model as this engine reads it (a vLLM
        # `random:1b` is the Hugging Face directory it resolves to, which is what the server reports back)
        model_file = self.adapter.model_file(info.argv) or model_file_name(candidate.model.path, adapter.model_format)
        claims, _ = verify_claims(candidate, report, model_file)
        if candidate.launch.mode != "attach":
            claims = launched_claims(claims, adapter, info.argv)
        info.verification = Verification(claims=claims, reported=report.record)
        try:
            info.served_model = select_model(report, candidate.model.served_name, base_url)
        except InputError as error:
            raise EngineFailed("model_not_served", str(error), stage="launch") from None

    def record_server_info(self) -> None:
        info = read_server_info(self.adapter, self.engine_info.base_url or "", self.headers)
        if not info:
            return
        self.writer.write_json("server_info.json", info)
        build = info.get("build_info")
        version = info.get("version") or (build if isinstance(build, str) else None)
        if version and not self.environment.engine_version:
            self.environment.engine_version = str(version)

    def check_pinned_version(self) -> None:
        """A candidate pinned to an engine release must be served by that release: a gate on "the new version" that
        measured the old one would pass for the wrong reason. An engine that reports no version is not checked."""
        pinned, reported = self.candidate.pins.engine_version, self.environment.engine_version
        if pinned and reported and pinned not in reported:
            raise EngineFailed("version_mismatch", f"pins.engine_version is {pinned!r}, but the engine reports "
                                                   f"{reported!r}", stage="launch")

    def endpoint(self) -> Endpoint:
        """The engine as the measurement sees it, fixed now that it answers."""
        info, candidate = self.engine_info, self.candidate
        return Endpoint(info.base_url or "", self.adapter, model=info.served_model,
                        api_key=self.api_key or "servebook", slots=self.slots(), context_tokens=self.context_per_request(),
                        engine_pid=info.pid if candidate.launch.mode == "local" else None, engine_log=self.writer.engine_log,
                        request_extras=candidate.request_extras, draft_source=candidate.knobs.drafter.acceptance_source,
                        chat_request_extras=self.adapter.chat_extras(candidate), session_header=self.target.session_header,
                        replica_urls=self.target.replica_urls, router_url=self.target.router_url,
                        settings=self.engine_info.verification.settings if self.engine_info.verification else {})

    def slots(self) -> int | None:
        """How many requests the engine runs at once: what it reports, else what the candidate sets."""
        reported = self.engine_info.verification.settings if self.engine_info.verification else {}
        value = reported.get("max_running_requests") or self.candidate.knobs.max_running_requests
        return int(value) if value else None

    def context_per_request(self) -> int | None:
        """What one request may hold: as the engine reports it (per slot, or in all), else as the knobs imply."""
        reported = self.engine_info.verification.settings if self.engine_info.verification else {}
        value = reported.get("context_per_slot") or reported.get("context_length")
        return int(value or self.adapter.context_per_request(self.candidate) or 0) or None

    def measure(self) -> None:
        """Measure the ready engine; EngineFailed when it did not serve the plan."""
        engine, endpoint = self.engine, self.endpoint()

        def alive_check() -> None:
            if engine.wait_exit(2.0):  # a dying engine needs a moment to be reaped
                engine.check_alive()

        drafter = self.candidate.knobs.drafter.kind
        watch = drafter_watch(drafter, endpoint.adapter, self.log, self.writer.engine_log)

        def after_cell() -> None:
            self.write_raw()
            watch()

        started = time.monotonic()
        try:
            run_blocking(lambda: measure_plan(endpoint, self.measured, self.log, tag=self.writer.run_id,
                                              alive_check=alive_check, reporter=self.reporter,
                                              on_cell=after_cell, turns=self.turns))
        except TRANSPORT_ERRORS as error:
            # The engine's death explains a lost connection; its socket can close a moment before it can be reaped
            # (a vLLM killed mid-cell on an H200 refused the next connection while it still ran)
            died = engine.wait_exit(2.0) or engine.exit_code() is not None
            mapped = engine_error(error, failure=engine.failure() if died else None)
            if mapped is error:
                raise
            raise (mapped.at("measure") if isinstance(mapped, EngineFailed) else mapped) from None
        self.engine_info.measure_s = round(time.monotonic() - started, 3)
        if engine.exit_code() is not None:
            raise engine.failure().at("measure")
        inactive_drafter(drafter, endpoint.adapter, self.log, self.writer.engine_log)

    def write_raw(self) -> None:
        """Every raw table measured so far. Called after each cell too, so a run killed mid-plan keeps its
        finished cells (each file replaced atomically: whole as of the last cell, never half-written)."""
        writer, log = self.writer, self.log
        writer.write_table("requests", log.request_rows())
        writer.write_table("chunks", log.chunk_rows())
        writer.write_table("scrapes", log.scrape_rows())
        for name, rows in (("telemetry", log.telemetry), ("gauges", log.gauges), ("outputs", log.outputs)):
            if rows:  # a run without them has no such file (journal contract)
                writer.write_table(name, rows)
        if log.outcomes:
            writer.write_table("cells", [dict(row) for row in log.cell_rows()])

    def sealed(self) -> dict[str, Any]:
        self.engine_info.replicas = replica_record(self.engine)[0]
        return {**self.identity.model_dump(), "environment": self.environment, "engine": self.engine_info,
                "finished_at": utc_now()}

    def seal(self, failure: EngineFailed | None) -> RunRecord:
        """The run's manifest, last: failed, or completed with its summary (degraded, every cell kept, when one of
        several replicas died while the others served). A disk that fills on the way fails a run that had not
        failed yet (disk_full), its tables as they were last written whole."""
        writer, log = self.writer, self.log
        try:
            self.write_raw()
            if failure is None and log.gate_results:
                writer.write_table("gates", [r.row() for r in log.gate_results])
        except DiskFull as full:
            failure = failure or full
        died = replica_record(self.engine)[1]
        if failure is not None:
            return self.seal_failed(failure)
        lost = None
        if died is not None:
            lost = Failure(stage="measure", cause="replica_lost", message=f"{died}; {describe_losses(log.cell_rows())}")
            self.reporter.log(f"run {writer.run_id} DEGRADED: {lost.message}")
        writer.seal(Manifest(**self.sealed(), status="completed" if lost is None else "degraded", failure=lost,
                             summary=Summary.model_validate(log.summary())))
        record = self.journal.run(writer.run_id)
        self.journal.index(write=True)
        return record

    def seal_failed(self, error: EngineFailed) -> RunRecord:
        """A failed run yields no figures: its raw rows stay, the cell summaries written on the way do not."""
        writer = self.writer
        writer.discard_table("cells")
        stage = error.stage or "measure"
        self.reporter.log(f"run {writer.run_id} FAILED during {stage}: {error.cause}: {error.message}")
        writer.seal(Manifest(**self.sealed(), status="failed", summary=None, failure=Failure(
            stage=stage, cause=error.cause, message=error.message, exit_code=error.exit_code,
            log_tail=error.log_tail)))
        return self.journal.run(writer.run_id)

    def seal_interrupted(self) -> RunInterrupted:
        """The user stopped the run: it keeps the cells it finished, sealed as `interrupted` (no evidence for a
        verdict)."""
        self.write_raw()
        writer, log = self.writer, self.log
        done = len(log.outcomes)
        message = (f"run {writer.run_id} interrupted after {done} cell{'s' if done != 1 else ''}; the engine was "
                   "stopped and the run sealed as interrupted, with its finished cells (verdicts leave it out)")
        summary = Summary.model_validate(log.summary()) if done else None
        writer.seal(Manifest(**self.sealed(), status="interrupted", summary=summary,
                             failure=Failure(stage="measure" if done else "launch", cause="interrupted",
                                             message=message)))
        return RunInterrupted(message, writer.run_id)  # said once, by whoever shows the interrupt


def run_candidate(candidate: Candidate, plan: Plan, journal: Journal, *, reporter: Reporter | None = None,
                  extra_manifest: dict[str, Any] | None = None, run_id: str | None = None, seat: Seat | None = None,
                  lane: str | None = None) -> RunRecord:
    """Launch `candidate`, measure `plan`, seal the run in `journal` and return it as recorded.

    `extra_manifest` adds context (the study and the name of the candidate in it);
    `run_id` lets a sweep choose the run's directory name before the notebook starts;
    `seat`: the run's place in a resident round, whose runs measure in turn (measure.turns);
    `lane`: the GPU group or node a parallel or Ray sweep placed the run on (recorded as environment.lane).
    Bad input raises InputError before anything is recorded; an engine that fails, or a disk that fills, yields a
    sealed `failed` run (DiskFull, before anything is recorded, when the disk cannot hold back what a seal needs).
    """
    run = RunContext.begin(candidate, plan, journal, reporter or Reporter(), extra_manifest=extra_manifest,
                           run_id=run_id, seat=seat, lane=lane)
    try:
        run.execute()
    except EngineFailed as error:
        return run.seal(error)
    except InputError:
        if not run.log.outcomes:  # bad input found once the engine answered: nothing was measured, nothing is kept
            run.writer.abandon()
        raise
    except (KeyboardInterrupt, RoundStopped):  # the engine is stopped already (execute's finally)
        raise run.seal_interrupted() from None
    return run.seal(None)
