"""The environment fingerprint stored with every run: what ran, where, on what."""

from __future__ import annotations

import hashlib
import os
import platform
import re
import socket
import subprocess
import sys
from pathlib import Path

from ..config.secrets import redact_env


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def engine_binary_version(binary: str) -> str | None:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = out.stdout + out.stderr
    match = re.search(r"version:\s*(\S+.*?commit \w+\))", text) or re.search(r"version:\s*(.+)", text)
    return match.group(1).strip() if match else None


def file_digest(path: str | Path, limit_bytes: int = 256 * 1024 * 1024) -> str | None:
    """sha256 of a model file (first `limit_bytes` for huge files, marked as such)."""
    path = Path(path)
    if not path.is_file():
        return None
    h = hashlib.sha256()
    size = path.stat().st_size
    with open(path, "rb") as f:
        remaining = limit_bytes
        while remaining > 0:
            block = f.read(min(1 << 20, remaining))
            if not block:
                break
            h.update(block)
            remaining -= len(block)
    prefix = "sha256:" if size <= limit_bytes else f"sha256-first-{limit_bytes}:"
    return prefix + h.hexdigest()


def _first_line(*paths: str) -> str | None:
    for path in paths:
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text:
            return text
    return None


def numa_nodes(sys_root: Path = Path("/sys/devices/system/node")) -> dict[str, str]:
    """Each NUMA node's CPUs ("0": "0-7"): with the cells' engine_cpus, which node the engine ran on."""
    nodes = {}
    for cpulist in sorted(sys_root.glob("node[0-9]*/cpulist")):
        text = _first_line(str(cpulist))
        if text:
            nodes[cpulist.parent.name[len("node"):]] = text
    return nodes


def machine_identity() -> dict[str, str | None]:
    """What tells machines apart when their host names do not (every lent VM may be called "vm"): the
    machine id, and the boot id (cloned images can share a machine id; one boot is one set of conditions)."""
    return {"machine_id": _first_line("/etc/machine-id", "/var/lib/dbus/machine-id"),
            "boot_id": _first_line("/proc/sys/kernel/random/boot_id")}


def fingerprint(*, engine_binary: str | None = None, model_path: str | None = None, lane: str | None = None,
                reference: str | None = None) -> dict:
    """The machine and what runs on it. `lane`: the GPU group or node (a block of the design) a parallel or Ray sweep
    placed the run on; it travels with the run, so a kept kernel's next run never inherits it. `reference`: the
    candidate's model as written (a `real:` one's package, version, digest and licence go with the run)."""
    from .._version import __version__
    from ..models.real_models import real_source

    engine_env = {k: v for k, v in os.environ.items() if k.startswith(("LLAMA_ARG_", "GGML_", "CUDA_VISIBLE"))}
    return {
        "host": socket.gethostname(),
        **machine_identity(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "numa_nodes": numa_nodes(),
        "memory_gib": _memory_gib(),
        "gpus": [],  # GPU engines fill this through their preflight; none on a CPU host
        "python": sys.version.split()[0],
        "servebook": __version__,
        "engine_version": engine_binary_version(engine_binary) if engine_binary else None,
        "model_digest": file_digest(model_path) if model_path else None,
        "model_source": real_source(reference),
        "engine_env": redact_env(engine_env),
        "lane": lane or None,
    }
