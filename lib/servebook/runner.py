"""One run: preflight, launch, wait ready, warm up, measure every cell, seal the run.

A server that never becomes ready, or dies, yields a sealed `failed` run with its classified
cause and log tail and no summary numbers. Ctrl-C stops the engine and leaves the run
unsealed, so the journal shows it as incomplete.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sys
import time

from .candidate import Candidate
from .cells import plan_cells
from .engines import FailureCause, get_engine
from .environment import fingerprint
from .journal import Journal, RunRecord, RunWriter, utc_now
from .launcher import AttachedEngine, EngineFailed, EngineProcess, free_port, tail_of
from .measure import Measurement, MeasurementLog, WarmupFailed
from .plan import Plan
from .preflight import preflight
from .progress import Reporter
from .redaction import redact_argv, redact_env


def _summary(cell_rows: list[dict]) -> dict:
    valid = [c for c in cell_rows if c["valid"]]
    return {
        "cells": len(cell_rows),
        "valid_cells": len(valid),
        "invalid_cells": {c["cell_id"]: c["invalid_reasons"] for c in cell_rows if not c["valid"]},
        "reconciled_cells": sum(1 for c in cell_rows if c["reconciliation"] == "ok"),
        "decode_aggregate_tok_s": {c["cell_id"]: c["aggregate_tok_s"] for c in valid if c["kind"] == "decode"},
        "prefill_tok_s": {c["cell_id"]: c["prefill_tok_s"] for c in valid if c["kind"] == "prefill"},
    }


def _run_async(make_coroutine) -> None:
    """asyncio.run, also from inside a Jupyter kernel, whose thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(make_coroutine())
        return
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="servebook-measure") as pool:
        pool.submit(lambda: asyncio.run(make_coroutine())).result()


def _inactive_drafter(candidate: Candidate, adapter, log: MeasurementLog, writer: RunWriter) -> EngineFailed | None:
    """A configured drafter that never drafted means the engine did not run the candidate as stated
    (llama.cpp, for one, logs a drafter it cannot load and serves on without it)."""
    drafter = candidate.knobs.drafter.kind
    # An n-gram drafter legitimately drafts nothing when the output never repeats itself.
    if drafter in ("none", "ngram") or not log.outcomes:
        return None
    counts = adapter.server_counts(log.outcomes[0].before, log.outcomes[-1].after)
    if counts is None or counts.draft_tokens is None or counts.draft_tokens > 0:
        return None
    tail = tail_of(writer.engine_log)
    errors = adapter.error_lines(writer.engine_log.read_text(errors="replace")[-4_000_000:])
    hint = next((line for line in errors if "spec" in line.lower() or "draft" in line.lower()), None)
    requests = sum(len(o.records) for o in log.outcomes)
    message = f"drafter {drafter} configured, but the engine drafted no tokens in {requests} requests"
    return EngineFailed(FailureCause("drafter_inactive", message + (f"; engine log: {hint}" if hint else "")),
                        tail, None)


def _server_info(adapter, base_url: str) -> dict | None:
    """What the engine says about itself (version, server args), from the first info path that answers."""
    import httpx

    for path in adapter.info_paths:
        try:
            response = httpx.get(f"{base_url}{path}", timeout=5)
        except httpx.HTTPError:
            continue
        if response.status_code == 200:
            try:
                body = response.json()
            except ValueError:
                continue
            return {"path": path, **body} if isinstance(body, dict) else {"path": path, "body": body}
    return None


def _write_raw(writer: RunWriter, log: MeasurementLog) -> None:
    writer.write_table("requests", log.request_rows())
    writer.write_table("chunks", log.chunk_rows())
    writer.write_table("scrapes", log.scrape_rows())


def run_candidate(
    candidate: Candidate,
    plan: Plan,
    journal: Journal,
    *,
    reporter: Reporter | None = None,
    extra_manifest: dict | None = None,
    run_id: str | None = None,
) -> RunRecord:
    """Launch `candidate`, measure `plan`, seal the run in `journal` and return it as recorded.

    `extra_manifest` adds context (the study and the name of the candidate in it);
    `run_id` lets a sweep choose the run's directory name before the notebook starts.
    """
    reporter = reporter or Reporter()
    adapter = get_engine(candidate.engine)
    journal.ensure_writable()
    paths = preflight(candidate, reporter)
    launch = candidate.launch
    port = launch.port or free_port(launch.host if launch.mode == "local" else "127.0.0.1")
    if launch.mode == "attach":
        argv: list[str] = []
        base_url = launch.url.rstrip("/")
    elif launch.mode == "compose":
        from .compose import render

        compose_plan = render(candidate, adapter, model_path=paths.model_path, draft_path=paths.draft_path,
                              first_port=port)
        argv = ["docker", "compose", "-p", compose_plan.project, "up"]
        base_url = f"http://127.0.0.1:{compose_plan.host_ports[0]}"
    else:
        argv = adapter.argv(candidate, port=port, model_path=paths.model_path, draft_path=paths.draft_path)
        if launch.simulator:
            argv = [sys.executable, "-m", "servebook.simulator", "--flavor", candidate.engine,
                    *[f"--fault={fault}" for fault in launch.sim_faults], "--", *argv]
        base_url = f"http://{launch.host}:{port}"

    writer = journal.start_run(candidate.id, run_id)
    started_at = utc_now()
    identity = {
        "candidate_id": candidate.id,
        "candidate_label": candidate.label,
        "candidate": candidate.model_dump(mode="json"),
        "plan_id": plan.id,
        "plan": plan.model_dump(mode="json"),
        **(extra_manifest or {}),
    }
    writer.write_json("launch.json", {
        **identity,
        "argv": redact_argv(argv),
        "env": redact_env(candidate.launch.env),
        "cwd": os.getcwd(),
        "base_url": base_url,
    })
    environment = fingerprint(engine_binary=paths.engine_binary if candidate.engine == "llamacpp" else None,
                              model_path=paths.model_path if candidate.engine == "llamacpp" else None)
    environment.update(paths.gpu_fingerprint)
    environment.update({"image": launch.image, "image_digest": candidate.pins.image_digest,
                        "model_revision": candidate.model.revision, "simulated": launch.simulator,
                        "preflight": paths.findings_json()})
    if launch.mode == "attach":
        engine = AttachedEngine(base_url, adapter, writer.engine_log)
    elif launch.mode == "compose":
        from .compose import ComposeEngine

        writer.write_json("compose.json", compose_plan.document)
        engine = ComposeEngine(compose_plan, adapter, writer.dir / "compose.yaml", writer.engine_log)
    else:
        engine = EngineProcess(argv, adapter, base_url, writer.engine_log, env=launch.env)
    reporter.log(f"run {writer.run_id}: {candidate.label} ({candidate.id}) on {base_url}")
    log = MeasurementLog()
    engine_info: dict = {"argv": redact_argv(argv), "base_url": base_url}

    def seal_failed(error: EngineFailed, stage: str) -> RunRecord:
        _write_raw(writer, log)
        reporter.log(f"run {writer.run_id} FAILED during {stage}: {error.cause.cause}: {error.cause.message}")
        writer.seal({
            **identity, "status": "failed", "environment": environment, "engine": engine_info,
            "started_at": started_at, "finished_at": utc_now(),
            "failure": {"stage": stage, "cause": error.cause.cause, "message": error.cause.message,
                        "exit_code": error.exit_code, "log_tail": error.log_tail},
            "summary": None,
        })
        return journal.run(writer.run_id)

    def alive_check() -> None:
        if engine.wait_exit(2.0):  # a dying engine needs a moment to be reaped
            engine.check_alive()

    try:
        engine.start()
        engine_info["pid"] = engine.pid
        with reporter.task(f"start {candidate.engine} and wait for readiness") as task:
            try:
                engine_info["ready_s"] = round(engine.wait_ready(candidate.launch.ready_timeout_s,
                                                                 on_poll=lambda s: task.update(s)), 3)
            except EngineFailed as error:
                return seal_failed(error, "launch")
        info = _server_info(adapter, base_url)
        if info:
            writer.write_json("server_info.json", info)
            version = info.get("version") or (info.get("build_info") if isinstance(info.get("build_info"), str) else None)
            if version and not environment.get("engine_version"):
                environment["engine_version"] = str(version)
        cells = plan_cells(plan)
        total_requests = sum(c.n_requests for c in cells)

        async def measure() -> None:
            async with Measurement(base_url, adapter, plan, tag=writer.run_id, alive_check=alive_check,
                                   engine_log=writer.engine_log, request_extras=candidate.request_extras) as m:
                m.log = log
                engine_info["served_model"] = m.model_name
                with reporter.task("warm up", total=plan.warmup_requests) as task:
                    await m.warmup()
                    task.update(plan.warmup_requests)
                with reporter.task(f"measure {len(cells)} cells", total=total_requests) as task:
                    for spec in cells:
                        task.update(task.completed, description=f"measure: {spec.label}")
                        outcome = await m.run_cell(spec, on_done=task.advance)
                        s = outcome.summary
                        flag = "valid" if s["valid"] else f"INVALID ({s['invalid_reasons']})"
                        figure = (f"{s['aggregate_tok_s']:.1f} tok/s aggregate" if spec.kind == "decode"
                                  and s["aggregate_tok_s"] else
                                  f"{s['prefill_tok_s']:.0f} tok/s prefill" if s.get("prefill_tok_s") else "no figure")
                        reporter.log(f"  {spec.label}: {figure}; {s['reconciliation']}; {flag}")
                if plan.gates:
                    with reporter.task(f"gates: {', '.join(plan.gates)}"):
                        await m.run_gates()

        t0 = time.monotonic()
        try:
            _run_async(measure)
        except EngineFailed as error:
            return seal_failed(error, "measure")
        except WarmupFailed as error:
            return seal_failed(EngineFailed(FailureCause("warmup_failed", f"the first request failed: {error}"),
                                            tail_of(writer.engine_log), None), "warmup")
        except RuntimeError as error:
            if engine.exit_code() is not None:
                return seal_failed(engine.failure(), "measure")
            raise RuntimeError(f"run {writer.run_id}: {error}") from error
        engine_info["measure_s"] = round(time.monotonic() - t0, 3)
        if engine.exit_code() is not None:
            return seal_failed(engine.failure(), "measure")
        inactive = _inactive_drafter(candidate, adapter, log, writer)
        if inactive is not None:
            return seal_failed(inactive, "measure")
    finally:
        engine.stop()

    _write_raw(writer, log)
    writer.write_table("cells", log.cell_rows())
    summary = _summary(log.cell_rows())
    if log.gate_results:
        from .gates import gate_summary

        writer.write_table("gates", [r.row() for r in log.gate_results])
        summary["gates"] = gate_summary(log.gate_results)
    writer.seal({
        **identity, "status": "completed", "environment": environment, "engine": engine_info,
        "started_at": started_at, "finished_at": utc_now(), "failure": None, "summary": summary,
    })
    record = journal.run(writer.run_id)
    journal.index()
    return record
