"""Where a run's engine will answer and what starts it (argv, or a compose project, or an attached URL), decided
before the run's directory exists; and the API key it is started with and sent, read from the environment."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..config.candidate import Candidate
from ..config.errors import InputError
from ..engines import EngineAdapter
from .preflight import ResolvedPaths
from .process import free_port

if TYPE_CHECKING:
    from .compose import ComposePlan


def api_key_of(candidate: Candidate) -> str | None:
    """The key named by launch.api_key_env, read from the environment (never from a file servebook writes)."""
    name = candidate.launch.api_key_env
    if not name:
        return None
    value = os.environ.get(name)
    if not value:
        raise InputError(f"launch.api_key_env: the environment variable {name} is not set (export the key first)")
    return value


@dataclass
class Target:
    """Where the engine will answer and what starts it, decided before the run directory exists."""

    argv: list[str]
    base_url: str
    compose_plan: ComposePlan | None = None


def target_for(candidate: Candidate, adapter: EngineAdapter, paths: ResolvedPaths, api_key: str | None) -> Target:
    launch = candidate.launch
    port = launch.port or free_port(launch.host if launch.mode == "local" else "127.0.0.1")
    if launch.mode == "attach":
        return Target([], (launch.url or "").rstrip("/"))
    if launch.mode == "compose":
        from .compose import render

        plan = render(candidate, adapter, model_path=paths.model_path, draft_path=paths.draft_path, first_port=port)
        return Target(["docker", "compose", "-p", plan.project, "up"], f"http://127.0.0.1:{plan.host_ports[0]}",
                       plan)
    binary = None if launch.simulator else paths.engine_binary
    argv = adapter.argv(candidate, port=port, model_path=paths.model_path, draft_path=paths.draft_path,
                        binary=binary, backend=paths.backend)
    if api_key and adapter.api_key_flag:
        argv += [adapter.api_key_flag, api_key]  # launch.json and the manifest get the redacted argv
    if launch.simulator:
        argv = [sys.executable, "-m", "servebook.engines.simulator", "--flavor", candidate.engine,
                *[f"--fault={fault}" for fault in launch.sim_faults], "--", *argv]
    return Target(argv, f"http://{launch.host}:{port}")
