"""Checks before anything launches: every one fails with a message that names the field and the fix.

GPU checks read nvidia-smi and never change anything (a power limit that differs from what the
candidate assumes is a warning, not something servebook touches). On a host without GPUs they
are skipped with a note that goes into the run's manifest.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..config.candidate import Candidate
from ..config.errors import InputError
from ..engines import EngineAdapter, ModelFormat, every_engine, get_engine
from ..engines.flags import RECORDED_SIMULATORS
from ..util.progress import Reporter
from .process import PortInUse, ensure_port_free

GENERATED_PREFIXES = ("tiny:", "random:", "real:")
BUSY_UTILIZATION_PCT = 10.0


@dataclass(frozen=True)
class Finding:
    code: str
    level: str  # error | warning | note
    message: str


@dataclass
class ResolvedPaths:
    engine_binary: str
    model_path: str
    draft_path: str | None
    findings: list[Finding] = field(default_factory=list)
    gpu_fingerprint: dict = field(default_factory=dict)
    #: the compute backend of the build that will run ("cuda", "cpu"; None: not a servebook build)
    backend: str | None = None

    def findings_json(self) -> list[dict]:
        return [asdict(f) for f in self.findings]


class PreflightFailed(InputError):
    def __init__(self, findings: list[Finding]):
        self.findings = findings
        errors = [f for f in findings if f.level == "error"]
        super().__init__("preflight refused the launch:\n" + "\n".join(f"  {f.code}: {f.message}" for f in errors))


def resolve_model_path(value: str, field_name: str, reporter: Reporter, fmt: ModelFormat = "gguf") -> str:
    """A model reference as a file (`fmt` "gguf") or a Hugging Face directory ("hf"): `tiny:NAME` and `random:NAME`
    are written once (cached), `real:NAME` assembled once from its registry package, a path must exist."""
    from ..models.random_models import ensure_generated
    from ..models.real_checkpoints import ensure_real_hf_checkpoint
    from ..models.real_models import REAL_PREFIX, ensure_real_model

    if value.startswith(REAL_PREFIX):
        try:
            written = ensure_real_model(value, reporter) if fmt == "gguf" else ensure_real_hf_checkpoint(value, reporter)
            return str(written)
        except KeyError as error:
            raise InputError(f"{field_name}: {error.args[0]}") from None
    try:
        generated = ensure_generated(value, reporter, fmt)
    except KeyError as error:
        raise InputError(f"{field_name}: {error.args[0]}") from None
    if generated is not None:
        return str(generated)
    path = Path(value).expanduser()
    if not path.exists():
        given = "an existing GGUF file" if fmt == "gguf" else "an existing Hugging Face model directory"
        raise InputError(f"{field_name}: model {'file' if fmt == 'gguf' else 'directory'} not found: {path} "
                         f"(give {given}, tiny:target, random:0.5b / 1b / 3b / 8b, "
                         "or real:gemma3-270m)")
    return str(path.resolve())


def gpu_checks(candidate: Candidate, inventory, disk_path: Path | None = None, shared: bool = False, *,
               adapter: EngineAdapter | None = None) -> list[Finding]:
    """E_GPU_MISSING, E_GPU_BUSY, E_GPU_MEMORY, E_P2P, W_POWER and E_DISK for one candidate. `shared`: a resident
    round's engines share the GPU by design, so a busy GPU is noted, not refused (each cell still checks that no
    process outside the round is on it). `adapter`: the run's (looked up for a caller without one)."""
    from .compose import gpu_groups

    findings: list[Finding] = []
    needs = candidate.launch.resources
    if needs.disk_gib and disk_path is not None:
        free = shutil.disk_usage(disk_path).free / 2**30
        if free < needs.disk_gib:
            findings.append(Finding("E_DISK", "error", f"{disk_path} has {free:.0f} GiB free, the candidate needs "
                                                       f"{needs.disk_gib:g} GiB (launch.resources.disk_gib)"))
    if not (adapter or get_engine(candidate.engine)).uses_gpus(candidate):
        return findings
    if not inventory.gpus:
        return findings + [Finding("N_NO_GPU", "note", inventory.note or "no GPU: GPU checks skipped")]
    by_index = {g.index: g for g in inventory.gpus}
    for group in gpu_groups(candidate):
        for index in group:
            gpu = by_index.get(index)
            if gpu is None:
                findings.append(Finding("E_GPU_MISSING", "error", f"GPU {index} does not exist on this host "
                                        f"(it has {', '.join(str(i) for i in by_index)}); fix launch.gpus"))
            else:
                findings += _gpu_findings(index, gpu, needs, shared)
        findings += _p2p_findings(group, inventory)
    return findings


def _gpu_findings(index: int, gpu: Any, needs: Any, shared: bool) -> list[Finding]:
    """One GPU of the candidate's: busy (or shared with a resident round), short of memory, another power limit."""
    findings = []
    if gpu.processes or (gpu.utilization_pct or 0) > BUSY_UTILIZATION_PCT:
        holders = ", ".join(f"pid {p['pid']} {p.get('name', '')} ({(p['used_memory_mib'] or 0) / 1024:.1f} GiB)"
                            for p in gpu.processes) or f"{gpu.utilization_pct:.0f}% busy"
        findings.append(Finding("N_GPU_SHARED", "note", f"GPU {index} ({gpu.name}) is shared with the "
                                f"resident round: {holders}") if shared else
                        Finding("E_GPU_BUSY", "error", f"GPU {index} ({gpu.name}) is in use: {holders}"))
    if needs.gpu_memory_gib and gpu.memory_free_mib / 1024 < needs.gpu_memory_gib:
        findings.append(Finding("E_GPU_MEMORY", "error",
                                f"GPU {index} has {gpu.memory_free_mib / 1024:.1f} GiB free, the candidate "
                                f"needs {needs.gpu_memory_gib:g} GiB (launch.resources.gpu_memory_gib)"))
    if needs.power_limit_w and gpu.power_limit_w and abs(gpu.power_limit_w - needs.power_limit_w) > 1:
        findings.append(Finding("W_POWER", "warning",
                                f"GPU {index} power limit is {gpu.power_limit_w:g} W, the candidate assumes "
                                f"{needs.power_limit_w:g} W; servebook does not change it, figures may differ"))
    return findings


def _p2p_findings(group: Sequence[int], inventory: Any) -> list[Finding]:
    """Each pair of one tensor-parallel group's GPUs without peer-to-peer access."""
    return [Finding("E_P2P", "error", f"GPUs {a} and {b} have no peer-to-peer access ({inventory.p2p[(a, b)]}); "
                    f"tensor parallel {len(group)} would be slow or fail: pick GPUs on one switch in launch.gpus")
            for a in group for b in group if a < b and inventory.p2p.get((a, b), "OK") != "OK"]


def other_engine_processes(proc: Path = Path("/proc")) -> list[tuple[int, str]]:
    """Engines already running on this host (pid, command): on a CPU host they share the cores with the
    candidate, and two spinning ggml thread pools on two cores made decode about 30x slower here."""
    markers = [m for adapter in every_engine() for m in adapter.process_markers]
    found = []
    me = os.getpid()
    for entry in proc.iterdir() if proc.is_dir() else []:
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if state == "Z" or not argv or not argv[0]:
            continue
        head = b" ".join(argv[:4])
        simulated = any(name.encode() in head for name in RECORDED_SIMULATORS)
        if any(marker in head for marker in markers) and not simulated:
            found.append((int(entry.name), b" ".join(argv).decode(errors="replace")[:160]))
    return found


def host_checks() -> list[Finding]:
    return [Finding("W_HOST_BUSY", "warning", f"another engine is running on this host (pid {pid}: {command}); "
                                              "its load distorts every figure of this run")
            for pid, command in other_engine_processes()]


def _check_replica_ports_and_router(candidate: Candidate) -> None:
    """What a local launch needs of this host before anything starts: every replica's port free (they run up from
    launch.port), and the router's package importable by this interpreter (it is started as `python -m`); either
    missing made a `crash` run after the first replicas were up."""
    import importlib.util

    from .replicas import ROUTER_MODULES

    launch = candidate.launch
    ports = range(launch.port, launch.port + launch.replicas) if launch.port is not None else range(0)
    for index, port in enumerate(ports):
        try:
            ensure_port_free(launch.host, port)
        except PortInUse as error:
            raise InputError(str(error) if index == 0 else
                             f"launch.port: {launch.host}:{port}, replica {index}'s port (launch.port + "
                             f"{index}), is already in use; pick another launch.port or leave it empty to get free "
                             "ones") from None
    router = launch.router
    if router is not None and importlib.util.find_spec(ROUTER_MODULES[router.kind].split(".")[0]) is None:
        raise InputError(f"launch.router.kind: {router.kind} is not installed for {sys.executable} "
                         f"(pip install {router.kind})")


def preflight(candidate: Candidate, reporter: Reporter, *, inventory=None, shared: bool = False,
              adapter: EngineAdapter | None = None) -> ResolvedPaths:
    """Check the host for the candidate and resolve its files; `shared`: in a resident round (sweep --resident),
    where the round's other engines are on this host and GPU by design. `adapter`: the run's (looked up from the
    candidate's engine for a caller without one)."""
    from . import gpu_inventory

    launch = candidate.launch
    if launch.mode == "local":
        _check_replica_ports_and_router(candidate)
    model = candidate.model.path or candidate.model.id
    assert model is not None  # a ModelRef holds exactly one of them
    draft = candidate.knobs.drafter.model
    if launch.simulator or launch.mode == "attach":
        return ResolvedPaths(sys.executable, model, draft)

    inventory = inventory if inventory is not None else gpu_inventory.inventory()
    disk = Path(candidate.model.path).expanduser().parent if candidate.model.path and not \
        candidate.model.path.startswith(GENERATED_PREFIXES) else Path(os.environ.get("HF_HOME", Path.home()))
    adapter = adapter or get_engine(candidate.engine)
    findings = gpu_checks(candidate, inventory, disk if disk.exists() else None, shared, adapter=adapter)
    if launch.mode == "local" and not shared:
        findings += host_checks()
    if any(f.level == "error" for f in findings):
        raise PreflightFailed(findings)
    for finding in findings:
        if finding.level != "error":
            reporter.log(f"preflight {finding.code}: {finding.message}")

    if launch.mode == "compose":
        binary = "docker"
    else:
        binary = adapter.local_binary(candidate, reporter)
        if candidate.model.path:
            model = resolve_model_path(candidate.model.path, "model.path", reporter, adapter.model_format)
        # a local engine reads its draft from a file too; any engine's generated draft is written here first
        if draft and (adapter.fingerprints_binary or draft.startswith(GENERATED_PREFIXES)):
            draft = resolve_model_path(draft, "knobs.drafter.model", reporter, adapter.model_format)
    return ResolvedPaths(binary, model, draft, findings, inventory.fingerprint(), adapter.backend())


def describe(candidate: Candidate) -> list[str]:
    """The preflight steps `--dry-run` prints, without running nvidia-smi or Docker."""
    from .compose import gpu_groups

    steps = []
    needs = candidate.launch.resources
    if get_engine(candidate.engine).uses_gpus(candidate) and not candidate.launch.simulator \
            and candidate.launch.mode != "attach":
        groups = gpu_groups(candidate)
        checks = ["exist", "no other process (E_GPU_BUSY)"]
        if needs.gpu_memory_gib:
            checks.append(f">= {needs.gpu_memory_gib:g} GiB free (E_GPU_MEMORY)")
        if candidate.knobs.tensor_parallel_size > 1:
            checks.append("peer-to-peer within each replica (E_P2P)")
        if needs.power_limit_w:
            checks.append(f"power limit {needs.power_limit_w:g} W (W_POWER, never changed)")
        steps.append(f"nvidia-smi: GPUs {groups} must " + ", ".join(checks))
    if needs.disk_gib:
        steps.append(f"disk: >= {needs.disk_gib:g} GiB free where the model lives (E_DISK)")
    if candidate.launch.mode == "compose":
        steps.append("docker info: a running Docker engine (E_DOCKER)")
    return steps or ["no GPU checks for this engine"]
