"""What a run decides before its engine starts: who the run is, the launch record it writes first,
the machine it runs on, and the engine object that starts, watches and stops the server."""

from __future__ import annotations

import os
from typing import Any

from ..config.candidate import Candidate
from ..config.parameters import Seat
from ..config.plan import Plan
from ..config.secrets import redact_argv, redact_env
from ..engines import EngineAdapter
from ..journal import RunWriter, utc_now
from ..journal.manifest import Environment, RunIdentity
from ..launch.environment import fingerprint
from ..launch.preflight import ResolvedPaths
from ..launch.process import AttachedEngine, Engine, EngineProcess
from ..launch.replicas import replica_set
from ..launch.target import Target


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def run_identity(candidate: Candidate, plan: Plan, extra_manifest: dict[str, Any] | None,
                 seat: Seat | None) -> RunIdentity:
    """Who the run is: written to launch.json now, repeated in the manifest at sealing."""
    return RunIdentity.model_validate({
        "candidate_id": candidate.id, "candidate_label": candidate.label,
        "candidate": candidate.model_dump(mode="json"), "plan_id": plan.id,
        "plan": plan.model_dump(mode="json"), "started_at": utc_now(), **(extra_manifest or {}),
        **({"resident": seat} if seat else {})})


def write_launch(writer: RunWriter, identity: RunIdentity, candidate: Candidate,
                 adapter: EngineAdapter, target: Target) -> None:
    """launch.json: from here on the journal shows the run (incomplete until sealed)."""
    # what servebook adds for the engine (vLLM's development mode) is recorded with the rest
    env = redact_env({**adapter.launch_env(candidate), **candidate.launch.env})
    replicas = target.replicas.record(redact_argv) if target.replicas else {}
    writer.write_launch({**identity.model_dump(mode="json"), "argv": redact_argv(target.argv),
                         "env": env, "cwd": os.getcwd(), "base_url": target.base_url, **replicas})


def environment_of(candidate: Candidate, adapter: EngineAdapter, paths: ResolvedPaths,
                   lane: str | None) -> Environment:
    """The machine, the engine build and the model the run measures, fingerprinted."""
    local = adapter.fingerprints_binary and not candidate.launch.simulator
    data = fingerprint(engine_binary=paths.engine_binary if local else None,
                       model_path=paths.model_path if local else None, lane=lane,
                       reference=candidate.model.path)
    data.update(paths.gpu_fingerprint)
    if not candidate.launch.simulator:
        data.update(adapter.build_fingerprint(candidate))
    data.update({"image": candidate.launch.image, "image_digest": candidate.pins.image_digest,
                 "model_revision": candidate.model.revision,
                 "simulated": candidate.launch.simulator, "preflight": paths.findings_json()})
    return Environment.model_validate(data)


def engine_for(candidate: Candidate, adapter: EngineAdapter, target: Target, writer: RunWriter,
               headers: dict[str, str]) -> Engine:
    """What starts, watches and stops the engine: a process, a set of replicas, compose services,
    or nothing (attach)."""
    launch = candidate.launch
    if launch.mode == "attach":
        return AttachedEngine(target.base_url, adapter, writer.engine_log)
    if launch.mode == "compose":
        from ..launch.compose import ComposeEngine

        assert target.compose_plan is not None
        writer.write_json("compose.json", target.compose_plan.document)
        return ComposeEngine(target.compose_plan, adapter, writer.path("compose.yaml"),
                             writer.engine_log)
    env = {**adapter.launch_env(candidate), **launch.env}
    if target.replicas is not None:
        return replica_set(target.replicas, candidate, adapter, writer.engine_log.parent, env=env,
                           headers=headers, scrubber=writer.scrubber)
    return EngineProcess(target.argv, adapter, target.base_url, writer.engine_log, env=env,
                         scrubber=writer.scrubber)
