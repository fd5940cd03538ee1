"""One run's stages: `begin` (checks, then the run's directory and launch record), `execute`:
`launch` (start, wait ready, ask the engine who it is) and `measure`; the engine always stopped.

The engine adapter is looked up once, in `begin`, and handed to every stage. Each stage leaves one
record on the run (the launch: `Ready` and `EngineIdentity`; the measurement: its log), composed
into the manifest when the run is sealed (run.sealing).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..config.candidate import Candidate
from ..config.parameters import Seat
from ..config.plan import Plan
from ..config.secrets import Scrubber, redact_argv
from ..engines import EngineAdapter, get_engine
from ..engines.http_client import TRANSPORT_ERRORS, engine_error
from ..journal import Journal, RunWriter
from ..journal.manifest import Environment
from ..launch.identity import EngineIdentity, identify_attached, identify_launched
from ..launch.preflight import preflight
from ..launch.process import Engine
from ..launch.ready import Ready, bring_up
from ..launch.target import Target, api_key_of, target_for
from ..launch.verify import check_tokenizer
from ..measure.log import MeasurementLog
from ..measure.loop import measure_plan
from ..measure.observers.drafter_watch import drafter_watch, inactive_drafter
from ..measure.observers.host import pin_engine
from ..measure.openloop import plan_of_round
from ..measure.turns import NoTurns, Turns, turns_for
from ..util.aio import run_blocking
from ..util.errors import DiskFull, EngineFailed
from ..util.progress import Reporter
from .endpoint import endpoint_for
from .sealing import Sealing
from .setup import auth_headers, engine_for, environment_of, run_identity, write_launch


@dataclass
class RunContext:
    """One run, from the checks before anything is recorded to the engine stopped: what every stage
    shares, the stages as methods, and the record each stage leaves."""

    candidate: Candidate
    plan: Plan
    #: the plan as this run measures it: its interleaving round draws its own arrivals, the same
    #: for the whole round
    measured: Plan
    reporter: Reporter
    adapter: EngineAdapter
    api_key: str | None
    target: Target
    turns: Turns | NoTurns
    writer: RunWriter
    environment: Environment
    engine: Engine
    log: MeasurementLog
    sealing: Sealing
    #: the launch's records: the engine ready, and who it says it is (an attached server's before
    #: anything is recorded)
    ready: Ready | None = None
    engine_identity: EngineIdentity | None = None
    measure_s: float | None = None

    @classmethod
    def begin(cls, candidate: Candidate, plan: Plan, journal: Journal, reporter: Reporter, *,
              extra_manifest: dict[str, Any] | None = None, run_id: str | None = None,
              seat: Seat | None = None, lane: str | None = None) -> "RunContext":
        """Bad input refused (InputError) before anything is recorded; then the run's directory and
        its launch record: from here on the journal shows the run (incomplete until sealed)."""
        adapter = get_engine(candidate.engine)  # the run's one look-up: every stage is handed it
        journal.ensure_writable()
        adapter.check_plan_fits(candidate, plan)
        paths = preflight(candidate, reporter, shared=seat is not None, adapter=adapter)
        api_key = api_key_of(candidate)
        target = target_for(candidate, adapter, paths, api_key)
        attached = None
        if candidate.launch.mode == "attach":
            # Before anything is recorded: a server that is not the one the candidate describes
            # is refused.
            attached = identify_attached(candidate, adapter, target.base_url, auth_headers(api_key),
                                         paths.model_path, plan.needs_tokenizer)
        turns = turns_for(seat)
        scrubber = Scrubber.from_environment(candidate.launch.api_key_env)
        writer = journal.start_run(candidate.id, run_id, scrubber)
        identity = run_identity(candidate, plan, extra_manifest, seat)
        write_launch(writer, identity, candidate, adapter, target)
        environment = environment_of(candidate, adapter, paths, lane)
        engine = engine_for(candidate, adapter, target, writer, auth_headers(api_key))
        reporter.log(f"run {writer.run_id}: {candidate.label} ({candidate.id}) "
                     f"on {target.base_url}")
        rounds = journal.rounds_done(candidate.id, plan.id, environment.machine_key)
        log = MeasurementLog()
        return cls(candidate, plan, plan_of_round(plan, rounds), reporter, adapter, api_key,
                   target, turns, writer, environment, engine, log,
                   Sealing(journal, writer, log, reporter, identity), engine_identity=attached)

    def execute(self) -> None:
        """Start the engine, wait for it, record what it says about itself, measure; always stop
        it. EngineFailed (with its stage) when the engine did not come up or did not serve the
        plan."""
        try:
            self.launch()
            self.measure()
        finally:
            self.turns.leave()  # an engine that failed to start must not hold its round's start
            self.engine.stop()

    def launch(self) -> None:
        """The engine started and ready (EngineFailed at stage launch otherwise), pinned, its
        memory checked; then which model it serves and what it reports of itself, checked against
        the candidate."""
        candidate, adapter, base_url = self.candidate, self.adapter, self.target.base_url
        argv, headers = redact_argv(self.target.argv), auth_headers(self.api_key)
        self.ready = bring_up(self.engine, candidate, adapter, argv, self.writer.engine_log,
                              self.reporter, pin=pin_engine)
        identity = self.engine_identity or identify_launched(candidate, adapter, base_url,
                                                             headers, argv)
        self.engine_identity = identity
        try:
            for name, body in identity.kept().items():
                self.writer.write_json(name, body)
        except DiskFull as full:  # no room to keep what the engine says of itself: launch failed
            full.at("launch")
            raise
        identity.check(candidate, self.environment.engine_version or identity.version)
        # A launched server whose tokenizer servebook cannot know beforehand (a command template)
        # is asked now; an attached one was asked before anything was recorded.
        if candidate.launch.mode != "attach":
            check_tokenizer(adapter, base_url, headers, identity.served_model,
                            self.plan.needs_tokenizer)

    def measure(self) -> None:
        """Measure the ready engine; EngineFailed when it did not serve the plan."""
        engine, sealing, engine_log = self.engine, self.sealing, self.writer.engine_log
        endpoint = endpoint_for(self.candidate, self.adapter, self.target, self.engine_identity,
                                api_key=self.api_key, engine_pid=engine.pid, engine_log=engine_log)

        def alive_check() -> None:
            if engine.wait_exit(2.0):  # a dying engine needs a moment to be reaped
                engine.check_alive()

        drafter = self.candidate.knobs.drafter.kind
        watch = drafter_watch(drafter, self.adapter, self.log, engine_log)

        def after_cell() -> None:
            sealing.write_raw()
            watch()

        started = time.monotonic()
        try:
            run_blocking(lambda: measure_plan(
                endpoint, self.measured, self.log, tag=self.writer.run_id, alive_check=alive_check,
                reporter=self.reporter, on_cell=after_cell, turns=self.turns))
        except TRANSPORT_ERRORS as error:
            # The engine's death explains a lost connection; its socket can close a moment before
            # it can be reaped (a vLLM killed mid-cell on an H200 refused the next connection
            # while it still ran)
            died = engine.wait_exit(2.0) or engine.exit_code() is not None
            mapped = engine_error(error, failure=engine.failure() if died else None)
            if mapped is error:
                raise
            raise (mapped.at("measure") if isinstance(mapped, EngineFailed) else mapped) from None
        self.measure_s = round(time.monotonic() - started, 3)
        if engine.exit_code() is not None:
            raise engine.failure().at("measure")
        inactive_drafter(drafter, self.adapter, self.log, engine_log)
