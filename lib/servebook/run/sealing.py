"""Sealing a run: its raw tables written whole, then its manifest, last.

A run is sealed completed (degraded, every cell kept, when one of several replicas died while the
others served), failed (its raw rows kept, no figures) or interrupted (the cells it finished, no
evidence for a verdict). The engine is stopped before, so nothing under a sealed run changes after.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.secrets import redact_argv
from ..journal import Journal, RunRecord, RunWriter, utc_now
from ..journal.manifest import EngineInfo, Environment, Failure, Manifest, RunIdentity, Summary
from ..launch.identity import EngineIdentity
from ..launch.process import Engine
from ..launch.ready import Ready
from ..launch.replicas import replica_record
from ..launch.target import Target
from ..measure.log import MeasurementLog
from ..measure.observers.replicas import describe_losses
from ..util.errors import DiskFull, EngineFailed, RunInterrupted
from ..util.progress import Reporter


@dataclass(frozen=True)
class Ended:
    """What the manifest says of the machine and of the engine, composed once the engine stopped."""

    environment: Environment
    engine: EngineInfo
    #: the replica that died while the others served (the run is degraded), in words
    died: str | None = None


def ended(environment: Environment, target: Target, engine: Engine, ready: Ready | None,
          identity: EngineIdentity | None, measure_s: float | None) -> Ended:
    """The launch's records as the manifest holds them; `ready`, `identity`, `measure_s`: None where
    the run stopped before that stage."""
    version = environment.engine_version or (identity.version if identity else None)
    if version != environment.engine_version:
        environment = environment.model_copy(update={"engine_version": version})
    replicas, died = replica_record(engine)
    info = EngineInfo(
        argv=redact_argv(target.argv), base_url=target.base_url, pid=engine.pid,
        ready_s=ready.ready_s if ready else None, measure_s=measure_s,
        served_model=identity.served_model if identity else None,
        verification=identity.verification if identity else None,
        memory=ready.memory if ready else None, pinned=ready.pinned if ready else None,
        replicas=replicas)
    return Ended(environment, info, died)


@dataclass(frozen=True)
class Sealing:
    """Where a run is sealed and what it holds, fixed when the run begins."""

    journal: Journal
    writer: RunWriter
    log: MeasurementLog
    reporter: Reporter
    identity: RunIdentity

    def write_raw(self) -> None:
        """Every raw table measured so far. Called after each cell too, so a run killed mid-plan
        keeps its finished cells (each file replaced atomically: whole as of the last cell, never
        half-written)."""
        writer, log = self.writer, self.log
        writer.write_table("requests", log.request_rows())
        writer.write_table("chunks", log.chunk_rows())
        writer.write_table("scrapes", log.scrape_rows())
        optional = (("telemetry", log.telemetry), ("gauges", log.gauges), ("outputs", log.outputs))
        for name, rows in optional:
            if rows:  # a run without them has no such file (journal contract)
                writer.write_table(name, rows)
        if log.outcomes:
            writer.write_table("cells", [dict(row) for row in log.cell_rows()])

    def manifest(self, end: Ended, **fields) -> Manifest:
        return Manifest(**self.identity.model_dump(), environment=end.environment,
                        engine=end.engine, finished_at=utc_now(), **fields)

    def seal(self, end: Ended, failure: EngineFailed | None) -> RunRecord:
        """The run's manifest, last: failed, or completed with its summary. A disk that fills on
        the way fails a run that had not failed yet (disk_full), its tables as they were last
        written whole."""
        writer, log = self.writer, self.log
        try:
            self.write_raw()
            if failure is None and log.gate_results:
                writer.write_table("gates", [r.row() for r in log.gate_results])
        except DiskFull as full:
            failure = failure or full
        if failure is not None:
            return self.seal_failed(end, failure)
        lost = None
        if end.died is not None:
            message = f"{end.died}; {describe_losses(log.cell_rows())}"
            lost = Failure(stage="measure", cause="replica_lost", message=message)
            self.reporter.log(f"run {writer.run_id} DEGRADED: {message}")
        status = "completed" if lost is None else "degraded"
        summary = Summary.model_validate(log.summary())
        writer.seal(self.manifest(end, status=status, failure=lost, summary=summary))
        record = self.journal.run(writer.run_id)
        self.journal.index(write=True)
        return record

    def seal_failed(self, end: Ended, error: EngineFailed) -> RunRecord:
        """A failed run yields no figures: its raw rows stay, the cell summaries written on the way
        do not."""
        writer = self.writer
        writer.discard_table("cells")
        stage = error.stage or "measure"
        self.reporter.log(f"run {writer.run_id} FAILED during {stage}: {error.cause}: "
                          f"{error.message}")
        failure = Failure(stage=stage, cause=error.cause, message=error.message,
                          exit_code=error.exit_code, log_tail=error.log_tail)
        writer.seal(self.manifest(end, status="failed", summary=None, failure=failure))
        return self.journal.run(writer.run_id)

    def seal_interrupted(self, end: Ended) -> RunInterrupted:
        """The user stopped the run: it keeps the cells it finished, sealed as `interrupted` (no
        evidence for a verdict)."""
        self.write_raw()
        writer, log = self.writer, self.log
        done = len(log.outcomes)
        cells = f"{done} cell{'s' if done != 1 else ''}"
        message = (f"run {writer.run_id} interrupted after {cells}; the engine was stopped and the "
                   "run sealed as interrupted, with its finished cells (verdicts leave it out)")
        summary = Summary.model_validate(log.summary()) if done else None
        failure = Failure(stage="measure" if done else "launch", cause="interrupted",
                          message=message)
        writer.seal(self.manifest(end, status="interrupted", summary=summary, failure=failure))
        return RunInterrupted(message, writer.run_id)  # said once, by whoever shows the interrupt
