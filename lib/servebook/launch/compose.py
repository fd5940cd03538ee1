"""Docker compose launches, the way production recipes run GPU engines.

One service per replica: the image pinned by digest, its own GPUs (`device_ids`), its own port,
the model volume, and a compile cache of its own (two replicas writing one torch/triton cache
corrupt each other's entries). Replicas start one after another, each waited for until healthy,
because simultaneous loads contend for host memory and disk and make the first one slow.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..config.candidate import Candidate
from ..config.errors import InputError
from ..engines import Diagnosis
from ..engines.http_client import EngineClient
from ..util.files import tail_of
from .process import EngineFailed, NoLocalProcess
from .roles import LaunchedEngine


@dataclass(frozen=True)
class ComposePlan:
    project: str
    services: list[str]
    document: dict
    host_ports: list[int]

    def yaml(self) -> str:
        return yaml.safe_dump(self.document, sort_keys=False, width=200, default_flow_style=None)

    def commands(self, compose_file: str) -> list[list[str]]:
        """The command sequence: pull, then each replica up and healthy before the next, then down."""
        base = ["docker", "compose", "-f", compose_file, "-p", self.project]
        sequence = [base + ["pull"]]
        for service in self.services:
            sequence.append(base + ["up", "-d", "--no-deps", service])
            sequence.append(["<wait for health>", service])
        sequence.append(base + ["logs", "--no-color", "--timestamps"])
        sequence.append(base + ["down", "--timeout", "30"])
        return sequence


def visible_gpus() -> list[int] | None:
    """The GPUs this process was given (CUDA_VISIBLE_DEVICES, as a parallel sweep or Ray sets it), by index."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None or not value.strip():
        return None
    try:
        return [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        return None  # UUIDs or MIG names: not indices servebook can check


def gpu_groups(candidate: Candidate) -> list[list[int]]:
    """GPUs per replica: consecutive groups of tensor_parallel_size from launch.gpus, else from the GPUs this
    process was given, else 0, 1, ..."""
    tp = candidate.knobs.tensor_parallel_size
    replicas = candidate.launch.replicas
    gpus = candidate.launch.gpus if candidate.launch.gpus is not None else \
        (visible_gpus() or list(range(tp * replicas)))
    if len(gpus) < tp * replicas:
        raise InputError(f"launch.gpus: {replicas} replica(s) at tensor_parallel_size {tp} need {tp * replicas} "
                         f"GPUs, only {len(gpus)} listed ({gpus})")
    return [gpus[i * tp:(i + 1) * tp] for i in range(replicas)]


def render(candidate: Candidate, adapter: LaunchedEngine, *, model_path: str, draft_path: str | None,
           first_port: int) -> ComposePlan:
    launch = candidate.launch
    image = launch.image or ""
    digest = candidate.pins.image_digest
    if digest:
        image = f"{image.split('@')[0]}@{digest}"
    project = f"servebook-{candidate.id[:8]}"
    container_port = adapter.container_port
    services: dict = {}
    names, ports = [], []
    for i, devices in enumerate(gpu_groups(candidate)):
        name = f"{candidate.engine}-r{i}"
        host_port = first_port + i
        environment = {**adapter.launch_env(candidate), **launch.env}
        volumes = list(launch.volumes)
        if launch.compile_cache:
            cache = f"{launch.compile_cache.rstrip('/')}/{project}/replica-{i}"
            volumes.append(f"{cache}:/root/.cache/compile")
            for variable in adapter.compile_cache_env:
                environment[variable] = f"/root/.cache/compile/{variable.lower()}"
        command = adapter.argv(candidate, port=container_port, model_path=model_path, draft_path=draft_path)
        if launch.api_key_env and adapter.api_key_flag:
            # `docker compose` fills ${NAME} in from its own environment: the file holds the name, never the key.
            command += [adapter.api_key_flag, "${" + launch.api_key_env + "}"]
        services[name] = {
            "image": image,
            "container_name": f"{project}-r{i}",
            # The whole argv as the entrypoint: images differ in theirs (vllm/vllm-openai already
            # starts `vllm serve`), and a command appended to an unknown entrypoint is a guess.
            "entrypoint": command,
            "ports": [f"127.0.0.1:{host_port}:{container_port}"],
            "volumes": volumes,
            "environment": environment,
            "ipc": "host",
            "shm_size": "32gb",
            "deploy": {"resources": {"reservations": {"devices": [
                {"driver": "nvidia", "device_ids": [str(d) for d in devices], "capabilities": ["gpu"]}]}}},
            "healthcheck": {"test": ["CMD-SHELL", f"curl -fsS http://127.0.0.1:{container_port}"
                                                  f"{adapter.health_path()} || exit 1"],
                            "interval": "10s", "timeout": "5s", "retries": 3, "start_period": "1800s"},
            "restart": "no",
        }
        names.append(name)
        ports.append(host_port)
    return ComposePlan(project, names, {"name": project, "services": services}, ports)


def docker_available() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        result = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                                text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and bool(result.stdout.strip())


@dataclass
class ComposeEngine(NoLocalProcess):
    """Runs a rendered compose plan: replicas up one by one with health waits, logs kept, then down."""

    plan: ComposePlan
    adapter: LaunchedEngine
    compose_file: Path
    log_path: Path
    host: str = "127.0.0.1"
    _started: list[str] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.plan.host_ports[0]}"

    def _run(self, argv: list[str]) -> None:
        with open(self.log_path, "a") as log:
            log.write(f"$ {' '.join(argv)}\n")
            log.flush()
            result = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=3600)
        if result.returncode != 0:
            raise EngineFailed("crash", f"`{' '.join(argv[:6])} ...` exited {result.returncode}",
                               log_tail=tail_of(self.log_path), exit_code=result.returncode)

    def start(self) -> "ComposeEngine":
        if not docker_available():
            raise InputError("launch.mode: compose needs a running Docker engine (E_DOCKER: `docker info` failed "
                             "on this host); `servebook sweep --dry-run` prints the compose files instead")
        self.compose_file.write_text(self.plan.yaml())
        self._run(self.plan.commands(str(self.compose_file))[0])
        return self

    def wait_ready(self, timeout_s: float, on_poll=None) -> float:
        started = time.monotonic()
        base = ["docker", "compose", "-f", str(self.compose_file), "-p", self.plan.project]
        for service, port in zip(self.plan.services, self.plan.host_ports, strict=True):
            self._run(base + ["up", "-d", "--no-deps", service])
            self._started.append(service)
            client = EngineClient(f"http://{self.host}:{port}", timeout_s=2.0)
            deadline = time.monotonic() + timeout_s
            while not client.answers(self.adapter.health_path()):
                if time.monotonic() > deadline:
                    raise self.failure(Diagnosis("timeout", f"{service} not healthy after {timeout_s:g}s"))
                if on_poll:
                    on_poll(time.monotonic() - started)
                time.sleep(1.0)
        return time.monotonic() - started

    def failure(self, fallback: Diagnosis | None = None) -> EngineFailed:
        tail = tail_of(self.log_path)
        return (fallback or self.adapter.classify_failure(tail_of(self.log_path, self.adapter.diagnosis_lines),
                                                          None)).failed(tail)

    def stop(self, grace_s: float = 30.0) -> None:
        if not self._started:
            return
        base = ["docker", "compose", "-f", str(self.compose_file), "-p", self.plan.project]
        for argv in (base + ["logs", "--no-color", "--timestamps"], base + ["down", "--timeout", str(int(grace_s))]):
            try:
                self._run(argv)
            except EngineFailed:
                pass
        self._started.clear()
