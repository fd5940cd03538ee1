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
    #: `nvidia-smi topo -m` between GPU pairs: NV# (NVLink, # links), PIX, PXB, PHB, NODE, SYS (PCIe paths)
    links: dict[tuple[int, int], str] = field(default_factory=dict)
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
            # what a tensor-parallel group's all-reduce crosses: runs on hosts whose GPUs are linked otherwise are
            # other blocks, and a layout's verdict names the link it was measured over
            **({"gpu_links": {f"{a}-{b}": code for (a, b), code in sorted(self.links.items()) if a < b},
                "gpu_interconnect": interconnect(self.links)} if self.links else {}),
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
    """`nvidia-smi topo -p2p r` (OK / NS / CNS / ... between GPU pairs) or `topo -m` (NV18 / PIX / SYS ...): the
    GPU columns of the matrix, which come before its NIC and affinity columns."""
    matrix: dict[tuple[int, int], str] = {}
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # a header underlined for a terminal
    lines = [l for l in text.splitlines() if l.strip()]
    header = next((l for l in lines if re.match(r"^\s*GPU\d", l)), None)
    if header is None:
        return matrix
    columns = [int(c[3:]) for c in header.split() if re.fullmatch(r"GPU\d+", c)]
    for line in lines:
        parts = line.split()
        if parts and re.fullmatch(r"GPU\d+", parts[0]) and line is not header:
            row = int(parts[0][3:])
            for col, value in zip(columns, parts[1:], strict=False):
                matrix[(row, col)] = value
    return matrix


#: `nvidia-smi topo -m`'s codes from the nearest to the farthest pair: NVLink, then PCIe through one switch,
#: several switches, a host bridge, within a NUMA node, across the SMP interconnect
_PATHS = ("PIX", "PXB", "PHB", "NODE", "SYS")


def interconnect(links: dict[tuple[int, int], str]) -> str | None:
    """The farthest link between any two GPUs, in words: "NVLink (NV18) between every pair", "PCIe (SYS, across
    the CPU interconnect) between 0 and 2"; None with fewer than two GPUs."""
    pairs = {pair: code for pair, code in links.items() if pair[0] < pair[1]}
    if not pairs:
        return None

    def distance(code: str) -> tuple[int, int]:
        if code.startswith("NV"):
            return (0, -int(code[2:]) if code[2:].isdigit() else 0)  # more links, nearer
        return (1 + _PATHS.index(code), 0) if code in _PATHS else (len(_PATHS) + 1, 0)

    (a, b), code = max(pairs.items(), key=lambda item: distance(item[1]))
    if code.startswith("NV"):
        same = len({c for c in pairs.values()}) == 1
        return f"NVLink ({code}) between {'every pair' if same else f'{a} and {b} at least'}"
    words = {"PIX": "one PCIe switch", "PXB": "several PCIe switches", "PHB": "a PCIe host bridge",
             "NODE": "PCIe within a NUMA node", "SYS": "PCIe across the CPU interconnect"}.get(code, code)
    return f"{words} ({code}) between {a} and {b}"


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
        # the same matrix shape, link types in place of read capabilities
        links = parse_p2p(_run(["nvidia-smi", "topo", "-m"])) if len(gpus) > 1 else {}
    except (subprocess.SubprocessError, OSError) as error:
        return Inventory([], note=f"nvidia-smi failed ({error}): GPU checks skipped")
    if not gpus:
        return Inventory([], note="nvidia-smi lists no GPU: GPU checks skipped")
    return Inventory(gpus, cuda, p2p, links)


def as_dict(gpu: GPU) -> dict:
    return asdict(gpu)
