"""GPU telemetry during every cell, through NVML (nvidia-ml-py): clocks, power, temperature,
utilization, memory, throttle reasons and the processes on each GPU.

A background thread samples every GPU the engine runs on while a cell is measured. From the
samples come the cell's energy (power integrated over time), joules per output token and tokens
per second per watt, the throttle reasons seen (power cap, thermal: marked, since the figures are
then the throttled chip's), and other users' processes on the engine's GPUs (the cell is then
disturbed and leaves the statistics, as with a busy host CPU). Without NVML or GPUs nothing is
sampled and every GPU figure is left empty: not checked.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

#: NVML clock-event (throttle) reasons that change what a figure means; idle and app-clock settings do not
MARKED_REASONS = {0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal",
                  0x80: "hw_power_brake"}


@dataclass
class GpuSample:
    t: float
    index: int
    sm_clock_mhz: float | None
    mem_clock_mhz: float | None
    power_w: float | None
    power_limit_w: float | None
    temperature_c: float | None
    utilization_pct: float | None
    memory_used_mib: float | None
    throttle_reasons: int
    pids: list[int] = field(default_factory=list)

    def row(self, cell_id: str) -> dict:
        data = asdict(self)
        data["pids"] = ",".join(map(str, self.pids))
        return {"cell_id": cell_id, "source": "gpu", **data}


def _safe(read, *args):
    try:
        return read(*args)
    except Exception:  # noqa: BLE001 - NVML raises its own error class for every unsupported query
        return None


class NvmlReader:
    """Reads every GPU through NVML; `available` is False where there is no driver, library or GPU."""

    def __init__(self, nvml: Any = None):
        self.available = False
        self.handles: list[Any] = []
        try:
            if nvml is None:
                import pynvml

                nvml = pynvml
            nvml.nvmlInit()
            self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        except Exception:  # noqa: BLE001 - no NVML means no GPU telemetry, never a failed run
            return
        self.nvml = nvml
        self.available = bool(self.handles)

    def sample(self) -> list[GpuSample]:
        n, now, out = self.nvml, time.monotonic(), []
        for index, handle in enumerate(self.handles):
            power = _safe(n.nvmlDeviceGetPowerUsage, handle)
            limit = _safe(n.nvmlDeviceGetEnforcedPowerLimit, handle)
            utilization = _safe(n.nvmlDeviceGetUtilizationRates, handle)
            memory = _safe(n.nvmlDeviceGetMemoryInfo, handle)
            processes = _safe(n.nvmlDeviceGetComputeRunningProcesses, handle) or []
            out.append(GpuSample(
                now, index, _safe(n.nvmlDeviceGetClockInfo, handle, n.NVML_CLOCK_SM),
                _safe(n.nvmlDeviceGetClockInfo, handle, n.NVML_CLOCK_MEM),
                None if power is None else power / 1000.0, None if limit is None else limit / 1000.0,
                _safe(n.nvmlDeviceGetTemperature, handle, n.NVML_TEMPERATURE_GPU),
                None if utilization is None else utilization.gpu,
                None if memory is None else memory.used / 2**20,
                _safe(n.nvmlDeviceGetCurrentClocksThrottleReasons, handle) or 0,
                sorted(p.pid for p in processes)))
        return out


class GpuSampler:
    """Samples in a background thread while a cell runs: `with sampler: ...`, then `sampler.samples`."""

    def __init__(self, reader: NvmlReader, interval_s: float = 0.25):
        self.reader, self.interval_s = reader, interval_s
        self.samples: list[GpuSample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _loop(self) -> None:
        while True:
            self.samples.extend(self.reader.sample())
            if self._stop.wait(self.interval_s):
                break
        self.samples.extend(self.reader.sample())

    def __enter__(self) -> "GpuSampler":
        if self.reader.available:
            self._thread = threading.Thread(target=self._loop, name="servebook-gpu-telemetry", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


def _energy_j(samples: list[GpuSample]) -> float | None:
    """Power integrated over time (trapezoids), summed over GPUs."""
    total, seen = 0.0, False
    for index in {s.index for s in samples}:
        series = sorted((s.t, s.power_w) for s in samples if s.index == index and s.power_w is not None)
        for (t0, p0), (t1, p1) in zip(series, series[1:], strict=False):
            total += (p0 + p1) / 2 * (t1 - t0)
            seen = True
    return total if seen else None


def summarize_gpu(samples: list[GpuSample], own_pids: set[int], completion_tokens: int,
                  wall_s: float | None, windows: list[tuple[float, float]] | None = None) -> dict:
    """The cell's GPU figures; the engine's GPUs are those its processes run on (all of them if none is seen).
    With `windows` (a sliced cell's slices) only the samples inside them count, and energy is integrated window by
    window: between them the round's other engines ran."""
    empty = {"gpu_energy_j": None, "gpu_power_w": None, "gpu_sm_clock_mhz": None, "joules_per_token": None,
             "tok_s_per_w": None, "gpu_throttle": None, "gpu_foreign_pids": None}
    parts = [samples] if windows is None else [[s for s in samples if start <= s.t <= end] for start, end in windows]
    parts = [part for part in parts if part]
    if not parts:
        return empty
    every = [s for part in parts for s in part]
    ours = {s.index for s in every if own_pids & set(s.pids)} or {s.index for s in every}
    mine = [[s for s in part if s.index in ours] for part in parts]
    energies = [e for e in (_energy_j(part) for part in mine) if e is not None]
    energy = sum(energies) if energies else None
    span = sum(max(s.t for s in part) - min(s.t for s in part) for part in mine if part)
    power = energy / span if energy is not None and span > 0 else None
    flat = [s for part in mine for s in part]
    reasons = sorted({name for s in flat for bit, name in MARKED_REASONS.items() if s.throttle_reasons & bit})
    foreign = sorted({pid for s in flat for pid in s.pids if pid not in own_pids})
    clocks = [s.sm_clock_mhz for s in flat if s.sm_clock_mhz is not None]
    rate = completion_tokens / wall_s if wall_s else None
    return {"gpu_energy_j": energy, "gpu_power_w": power,
            "gpu_sm_clock_mhz": sum(clocks) / len(clocks) if clocks else None,
            "joules_per_token": energy / completion_tokens if energy is not None and completion_tokens else None,
            "tok_s_per_w": rate / power if rate is not None and power else None,
            "gpu_throttle": ",".join(reasons), "gpu_foreign_pids": ",".join(map(str, foreign))}
