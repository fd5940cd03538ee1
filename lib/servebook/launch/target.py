"""Where a run's engine will answer and what starts it (argv, a set of replicas behind an optional router, a compose
project, or an attached URL), decided before the run's directory exists; and the API key it is started with and
sent, read from the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..config.candidate import Candidate
from ..config.errors import InputError
from ..engines import EngineAdapter
from ..engines.flags import simulated_argv
from .preflight import ResolvedPaths
from .process import free_port
from .replicas import ReplicaPlan, plan_replicas

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
    #: launch.replicas / launch.router on this host: every replica's port and argv, and the router's
    replicas: ReplicaPlan | None = None

    @property
    def replica_urls(self) -> tuple[str, ...]:
        """Every replica's URL where there are several (each is scraped; the first is `base_url`); () for one."""
        if self.replicas is not None:
            return tuple(self.replicas.replica_urls)
        if self.compose_plan is not None and len(self.compose_plan.host_ports) > 1:
            return tuple(f"http://127.0.0.1:{port}" for port in self.compose_plan.host_ports)
        return ()

    @property
    def router_url(self) -> str | None:
        """The router the measured requests go through; None: servebook spreads them over `replica_urls`."""
        return self.replicas.router_url if self.replicas is not None else None

    @property
    def session_header(self) -> str | None:
        """The header the router reads a conversation's session key from; None without a router or a header."""
        return self.replicas.session_header if self.replicas is not None else None


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
    if launch.replicas > 1 or launch.router is not None:
        replicas = plan_replicas(candidate, lambda p: local_argv(candidate, adapter, paths, api_key, p))
        return Target(replicas.argvs[0], replicas.replica_urls[0], replicas=replicas)
    return Target(local_argv(candidate, adapter, paths, api_key, port), f"http://{launch.host}:{port}")


def local_argv(candidate: Candidate, adapter: EngineAdapter, paths: ResolvedPaths, api_key: str | None,
               port: int) -> list[str]:
    """The command line of one engine servebook starts here on `port` (the simulator in its place in tests)."""
    launch = candidate.launch
    binary = None if launch.simulator else paths.engine_binary
    argv = adapter.argv(candidate, port=port, model_path=paths.model_path, draft_path=paths.draft_path,
                        binary=binary, backend=paths.backend)
    if api_key and adapter.api_key_flag:
        argv += [adapter.api_key_flag, api_key]  # launch.json and the manifest get the redacted argv
    return simulated_argv(candidate.engine, launch.sim_faults, argv) if launch.simulator else argv
