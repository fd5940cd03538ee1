"""Several local replicas of one engine, each on its own port, optionally behind a router servebook starts.

The set is measured as one endpoint: requests go to the router, or are spread by servebook over every replica's
URL (measure.observers.replicas), and every replica's /metrics is scraped. A replica that dies while the others serve (a
fault plan's kill, or a crash) does not end the run: the set keeps serving on the rest and remembers which replica
died and when, so the run is sealed degraded with that record. The run fails only when the router or every replica
is gone. Every process gets its own process group and dies with servebook (launch.process), so none outlives it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.candidate import Candidate
from ..config.replicas import Router
from ..config.secrets import Scrubber
from ..engines import Diagnosis, EngineFailed
from ..engines.http_client import EngineClient
from ..util.files import tail_of
from .compose import gpu_groups
from .process import EngineProcess, free_port
from .roles import LaunchedEngine

#: the module each router kind is started from (both wheels ship the same launcher)
ROUTER_MODULES = {"sglang-router": "sglang_router.launch_router", "vllm-router": "vllm_router.launch_router"}


def replica_log_name(index: int) -> str:
    """Replica 0 writes the run's engine.log (the memory check and drafter diagnosis read it); the others their own."""
    return "engine.log" if index == 0 else f"engine-r{index}.log"


@dataclass(frozen=True)
class ReplicaPlan:
    """Where each replica and the router will listen, and what starts them; decided before the run exists."""

    host: str
    ports: list[int]
    argvs: list[list[str]]
    router_port: int | None = None
    router_argv: list[str] | None = None
    #: where the router's own Prometheus exporter listens
    router_metrics_port: int | None = None
    #: the header the router reads a conversation's session key from (launch.router.session_header)
    session_header: str | None = None

    @property
    def replica_urls(self) -> list[str]:
        return [f"http://{self.host}:{port}" for port in self.ports]

    @property
    def router_url(self) -> str | None:
        return None if self.router_port is None else f"http://127.0.0.1:{self.router_port}"

    @property
    def route_urls(self) -> list[str]:
        """Where the measured requests go: the router, else every replica in turn."""
        return [self.router_url] if self.router_url else self.replica_urls

    def record(self, redact: Callable[[list[str]], list[str]]) -> dict[str, Any]:
        """What launch.json keeps of the set (argvs through `redact`)."""
        return {"replicas": [{"index": i, "port": p, "argv": redact(a)} for i, (p, a) in
                             enumerate(zip(self.ports, self.argvs, strict=True))],
                "router": None if self.router_argv is None else {"port": self.router_port,
                                                                 "argv": redact(self.router_argv),
                                                                 "session_header": self.session_header}}


def router_argv(router: Router, port: int, worker_urls: list[str], metrics_port: int) -> list[str]:
    """The router's command line: the installed wheel's launcher, run by this interpreter. Its Prometheus exporter
    gets a free port too: both routers default to 29000, and a second router on the host (resident rounds, two
    sweeps) panicked with "Address already in use" before it was ready."""
    return [sys.executable, "-m", ROUTER_MODULES[router.kind], "--host", "127.0.0.1", "--port", str(port),
            "--worker-urls", *worker_urls, "--policy", router.policy, "--prometheus-host", "127.0.0.1",
            "--prometheus-port", str(metrics_port), *router.args]


def plan_replicas(candidate: Candidate, argv_for: Callable[[int], list[str]],
                  port_for: Callable[[], int] = free_port) -> ReplicaPlan:
    """One port and argv per replica (consecutive from launch.port where it is set, else free ones), and the
    router's, pointing at them."""
    launch = candidate.launch
    ports: list[int] = []
    for i in range(launch.replicas):
        if launch.port:
            ports.append(launch.port + i)
        else:
            _another_port(port_for, ports)
    plan = ReplicaPlan(launch.host, ports, [argv_for(port) for port in ports])
    if launch.router is None:
        return plan
    taken = list(ports)
    router_port, metrics_port = (_another_port(port_for, taken) for _ in range(2))
    return ReplicaPlan(launch.host, ports, plan.argvs, router_port,
                       router_argv(launch.router, router_port, plan.replica_urls, metrics_port), metrics_port,
                       launch.router.session_header)


def _another_port(port_for: Callable[[], int], taken: list[int]) -> int:
    """A port none of `taken` holds (two free-port picks can return the same port once the first socket closed),
    added to `taken`."""
    port = port_for()
    while port in taken:
        port = port_for()
    taken.append(port)
    return port


@dataclass
class ReplicaDeath:
    index: int
    port: int
    pid: int | None
    exit_code: int | None
    #: seconds after the set became ready (None: before it was ready)
    after_ready_s: float | None
    #: killed by the candidate's fault plan (launch.kill_replica), not on its own
    planned: bool


@dataclass
class ReplicaSet:
    """Every replica (and the router) started, waited for, watched and stopped as one engine (launch.process.Engine).

    `pid` is None: no one process is the engine, so host telemetry does not attribute CPU to it (as for compose)."""

    plan: ReplicaPlan
    adapter: LaunchedEngine
    run_dir: Path
    env: dict[str, str] | None = None
    #: what each replica's environment adds (its GPUs: gpu_split)
    replica_envs: list[dict[str, str]] = field(default_factory=list)
    kill: tuple[int, float] | None = None
    router_ready_timeout_s: float = 60.0
    #: whether replicas sharing a GPU start in turn (the engine sizes its memory from the device's free memory)
    shared_gpus_in_turn: bool = True
    #: what the router is asked with (the candidate's API key, which it passes on to the replicas)
    headers: dict[str, str] = field(default_factory=dict)
    #: what keeps secrets out of the replicas' and the router's logs (launch.scrubbed_log)
    scrubber: Scrubber | None = None
    replicas: list[EngineProcess] = field(default_factory=list)
    router: EngineProcess | None = None
    deaths: list[ReplicaDeath] = field(default_factory=list)
    pid: int | None = None
    _ready_at: float | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        """Replica 0: what the engine says of itself (model, props, tokenizer) is asked there; a router may not
        pass those requests on (sglang-router answers /tokenize and /props with 404)."""
        return self.plan.replica_urls[0]

    def start(self) -> "ReplicaSet":
        for i, argv in enumerate(self.plan.argvs):
            own = self.replica_envs[i] if i < len(self.replica_envs) else {}
            process = EngineProcess(argv, self.adapter, self.plan.replica_urls[i],
                                    self.run_dir / replica_log_name(i), env={**(self.env or {}), **own},
                                    scrubber=self.scrubber)
            self.replicas.append(process)
            if not self.waits_its_turn(i):
                process.start()
        return self

    def waits_its_turn(self, index: int) -> bool:
        """A replica sharing a GPU with an earlier one starts once that one is ready, when the engine sizes its
        memory from the device's free memory: vLLM's profiling charges a neighbour's loading to itself when both
        start at once (vllm-project/vllm#55827). Separate GPUs, and a fixed KV size, load at once."""
        if not self.shared_gpus_in_turn:
            return False

        def devices(i: int) -> set[str]:
            envs = self.replica_envs
            return set(envs[i].get("CUDA_VISIBLE_DEVICES", "").split(",")) - {""} if i < len(envs) else set()
        mine = devices(index)
        return any(mine & devices(earlier) for earlier in range(index))

    def wait_ready(self, timeout_s: float, on_poll: Callable[[float], None] | None = None) -> float:
        started = time.monotonic()
        for i, replica in enumerate(self.replicas):  # in order, so every earlier replica is ready when one waits
            if self.waits_its_turn(i):
                replica.start()
            replica.wait_ready(max(1.0, timeout_s - (time.monotonic() - started)), on_poll)
        if self.plan.router_argv is not None:
            self._start_router(on_poll, started)
        self._ready_at = time.monotonic()
        self._watch()
        return self._ready_at - started

    def _start_router(self, on_poll: Callable[[float], None] | None, started: float) -> None:
        assert self.plan.router_argv is not None and self.plan.router_url is not None
        self.router = EngineProcess(self.plan.router_argv, self.adapter, self.plan.router_url,
                                    self.run_dir / "router.log", env=self.env, scrubber=self.scrubber).start()
        deadline = time.monotonic() + self.router_ready_timeout_s
        client = EngineClient(self.plan.router_url, self.headers, timeout_s=2.0)
        # Healthy, and it has registered the workers: it lists their model (sglang-router answers /health at once).
        while not client.bodies(("/v1/models",)).get("/v1/models", {}).get("data"):
            if self.router.exit_code() is not None:
                raise self._router_failure("the router exited before it was ready")
            if time.monotonic() > deadline:
                raise self._router_failure(f"the router listed no model after {self.router_ready_timeout_s:g}s")
            if on_poll:
                on_poll(time.monotonic() - started)
            time.sleep(0.2)

    def _router_failure(self, message: str) -> EngineFailed:
        log = self.run_dir / "router.log"
        return Diagnosis("crash", f"{message}; router log: {tail_of(log, 5)}").failed(tail_of(log))

    def _watch(self) -> None:
        """Note every replica death as it happens; the fault plan's kill, when it is due."""
        def watch() -> None:
            while not self._stopping.wait(0.1):
                for i, replica in enumerate(self.replicas):
                    if replica.exit_code() is not None:
                        self._died(i, planned=False)

        def kill_due(index: int, after_s: float) -> None:
            if self._stopping.wait(after_s):
                return
            replica = self.replicas[index]
            if replica.process is not None and replica.exit_code() is None:
                self._died(index, planned=True)  # noted before the signal, so the watcher cannot call it a crash
                try:
                    os.killpg(replica.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                replica.process.wait()

        self._threads = [threading.Thread(target=watch, daemon=True, name="servebook-replicas")]
        if self.kill is not None:
            self._threads.append(threading.Thread(target=kill_due, args=self.kill, daemon=True,
                                                  name="servebook-replica-kill"))
        for thread in self._threads:
            thread.start()

    def _died(self, index: int, planned: bool) -> None:
        with self._lock:
            if any(d.index == index for d in self.deaths):
                return
            replica = self.replicas[index]
            after = None if self._ready_at is None else round(time.monotonic() - self._ready_at, 3)
            self.deaths.append(ReplicaDeath(index, self.plan.ports[index], replica.pid, replica.exit_code(), after,
                                            planned))

    def _serving(self) -> list[EngineProcess]:
        return [r for r in self.replicas if r.exit_code() is None]

    def exit_code(self) -> int | None:
        """The set has ended when its router has, or when every replica has."""
        if self.router is not None and self.router.exit_code() is not None:
            return self.router.exit_code()
        if self.replicas and not self._serving():
            return self.replicas[0].exit_code()
        return None

    def wait_exit(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.exit_code() is None:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def check_alive(self) -> None:
        if self.exit_code() is not None:
            raise self.failure()

    def failure(self, fallback: Diagnosis | None = None) -> EngineFailed:
        if self.router is not None and self.router.exit_code() is not None:
            return self._router_failure(f"the router exited ({self.router.exit_code()})")
        dead = [r for r in self.replicas if r.exit_code() is not None]
        return (dead[0] if dead else self.replicas[0]).failure(fallback)

    def record(self) -> dict[str, Any]:
        """What the run keeps of the set: each replica's port and pid, and every death."""
        return {"replicas": [{"index": i, "port": p, "pid": r.pid} for i, (p, r) in
                             enumerate(zip(self.plan.ports, self.replicas, strict=True))],
                "router": None if self.router is None else {"url": self.plan.router_url, "pid": self.router.pid},
                "deaths": [vars(d) for d in self.deaths]}

    def stop(self, grace_s: float = 10.0) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=2.0)
        if self.router is not None:  # first, so it sends nothing more to replicas that are going
            self.router.stop(grace_s)
        for i, replica in enumerate(self.replicas):
            if replica.exit_code() is not None:  # died since the watcher last looked (idempotent otherwise)
                self._died(i, planned=False)
            replica.stop(grace_s)

    def degraded(self) -> str | None:
        """Which replicas died while the others served, and when; None when every replica lasted."""
        if not self.deaths:
            return None
        parts = [f"replica {d.index} (port {d.port}, pid {d.pid}) "
                 f"{'killed by the fault plan' if d.planned else f'exited ({d.exit_code})'}"
                 f"{'' if d.after_ready_s is None else f' {d.after_ready_s:.1f} s after the replicas were ready'}"
                 for d in self.deaths]
        return f"{'; '.join(parts)}; {len(self.replicas) - len(self.deaths)} of {len(self.replicas)} kept serving"


def replica_set(plan: ReplicaPlan, candidate: Candidate, adapter: LaunchedEngine, run_dir: Path,
                env: dict[str, str], headers: dict[str, str] | None = None,
                scrubber: Scrubber | None = None) -> ReplicaSet:
    launch = candidate.launch
    kill = (launch.kill_replica.replica, launch.kill_replica.after_s) if launch.kill_replica else None
    timeout = launch.router.ready_timeout_s if launch.router else 60.0
    return ReplicaSet(plan, adapter, run_dir, env=env, replica_envs=gpu_split(candidate, adapter), kill=kill,
                      router_ready_timeout_s=timeout, headers=dict(headers or {}),
                      shared_gpus_in_turn=adapter.sizes_memory_from_free(candidate), scrubber=scrubber)


def gpu_split(candidate: Candidate, adapter: LaunchedEngine) -> list[dict[str, str]]:
    """Each replica's GPUs on a GPU host, as compose gives them (consecutive groups of tensor_parallel_size from
    launch.gpus or the GPUs this process was given; `gpus: [0, 0]` puts two replicas on one GPU); nothing on a CPU."""
    if candidate.launch.simulator or not (candidate.launch.gpus is not None or adapter.uses_gpus(candidate)):
        return []
    return [{"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in group)} for group in gpu_groups(candidate)]


def replica_record(engine: object) -> tuple[dict[str, Any] | None, str | None]:
    """What a run keeps of its replicas (None for one engine), and which died while the others served."""
    if not isinstance(engine, ReplicaSet):
        return None, None
    return engine.record(), engine.degraded()
