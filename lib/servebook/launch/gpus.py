"""GPU inventory through nvidia-smi: read-only (servebook never changes clocks or power limits)."""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field

QUERY = "index,uuid,name,memory.total,memory.used,memory.free,utilization.gpu,power.limit,driver_version"


@dataclass
class GPU:
    index: int
    uuid: str
    name: str
    memory_total_mib: float
    memory_used_mib: float
    memory_free_mib: float
    utilization_pct: float | None
    power_limit_w: float | None
    driver: str
    processes: list[dict] = field(default_factory=list)


@dataclass
class Inventory:
    gpus: list[GPU]
    cuda: str | None = None
    p2p: dict[tuple[int, int], str] = field(default_factory=dict)
    note: str | None = None

    def fingerprint(self) -> dict:
        return {
            "gpus": [{"index": g.index, "uuid": g.uuid, "name": g.name, "memory_total_mib": g.memory_total_mib,
                      "power_limit_w": g.power_limit_w} for g in self.gpus],
            "gpu_count": len(self.gpus),
            "gpu_model": self.gpus[0].name if self.gpus else None,
            "driver": self.gpus[0].driver if self.gpus else None,
            "cuda": self.cuda,
            "gpu_note": self.note,
        }


def _float(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"


def parse_gpus(text: str) -> list[GPU]:
    gpus = []
    for row in csv.reader(io.StringIO(text.strip())):
        if len(row) < 9:
            continue
        row = [c.strip() for c in row]
        gpus.append(GPU(int(row[0]), row[1], row[2], _float(row[3]) or 0.0, _float(row[4]) or 0.0,
                        _float(row[5]) or 0.0, _float(row[6]), _float(row[7]), row[8]))
    return gpus


def parse_processes(text: str, gpus: list[GPU]) -> None:
    by_uuid = {g.uuid: g for g in gpus}
    for row in csv.reader(io.StringIO(text.strip())):
        if len(row) < 3:
            continue
        uuid, pid, used = (c.strip() for c in row[:3])
        if uuid in by_uuid:
            by_uuid[uuid].processes.append({"pid": int(pid), "used_memory_mib": _float(used),
                                            "name": row[3].strip() if len(row) > 3 else ""})


def parse_cuda(text: str) -> str | None:
    match = re.search(r"CUDA Version:\s*([\d.]+)", text)
    return match.group(1) if match else None


def parse_p2p(text: str) -> dict[tuple[int, int], str]:
    """`nvidia-smi topo -p2p r`: a matrix of OK / NS / CNS / ... between GPU pairs."""
    matrix: dict[tuple[int, int], str] = {}
    lines = [l for l in text.splitlines() if l.strip()]
    header = next((l for l in lines if re.match(r"^\s*GPU\d", l)), None)
    if header is None:
        return matrix
    columns = [int(c[3:]) for c in header.split() if c.startswith("GPU")]
    for line in lines:
        parts = line.split()
        if parts and re.fullmatch(r"GPU\d+", parts[0]) and line is not header:
            row = int(parts[0][3:])
            for col, value in zip(columns, parts[1:], strict=False):
                matrix[(row, col)] = value
    return matrix


def _run(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout


def inventory() -> Inventory:
    """What nvidia-smi reports; an empty inventory with a note where there is no NVIDIA GPU."""
    if shutil.which("nvidia-smi") is None:
        return Inventory([], note="no nvidia-smi on this host: GPU checks skipped")
    try:
        gpus = parse_gpus(_run(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"]))
        parse_processes(_run(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,used_memory,process_name",
                              "--format=csv,noheader,nounits"]), gpus)
        cuda = parse_cuda(_run(["nvidia-smi"]))
        p2p = parse_p2p(_run(["nvidia-smi", "topo", "-p2p", "r"])) if len(gpus) > 1 else {}
    except (subprocess.SubprocessError, OSError) as error:
        return Inventory([], note=f"nvidia-smi failed ({error}): GPU checks skipped")
    if not gpus:
        return Inventory([], note="nvidia-smi lists no GPU: GPU checks skipped")
    return Inventory(gpus, cuda, p2p)


def as_dict(gpu: GPU) -> dict:
    return asdict(gpu)
