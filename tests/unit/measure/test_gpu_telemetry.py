"""GPU telemetry from recorded NVML readings: energy per token, tok/s per watt, throttled and busy cells."""

import json
from pathlib import Path
from types import SimpleNamespace

from servebook.measure.observers.gpu import GpuSampler, NvmlReader, summarize_gpu

RECORDED = json.loads((Path(__file__).parents[2] / "fixtures" / "nvml_h200_samples.json").read_text())


class RecordedNvml:
    """Answers NVML calls from recorded readings, one reading per sample of each GPU."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, readings, gpus=1):
        self.readings, self.gpus, self.step = readings, gpus, 0

    def now(self):
        return self.readings[min(self.step, len(self.readings) - 1)]

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetPowerUsage(self, h):
        return self.now()["power_mw"]

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self.now()["limit_mw"]

    def nvmlDeviceGetClockInfo(self, h, kind):
        return self.now()["sm" if kind == self.NVML_CLOCK_SM else "mem"]

    def nvmlDeviceGetTemperature(self, h, sensor):
        return self.now()["temp"]

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=self.now()["util"], memory=40)

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=self.now()["used"], total=150_000_000_000)

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=p) for p in self.now()["pids"]]

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        reasons = self.now()["reasons"]
        self.step += 1  # the last query of a sample: the next sample reads the next recording
        return reasons


def samples_of(readings):
    reader = NvmlReader(RecordedNvml(readings))
    samples = []
    for i in range(len(readings)):
        for sample in reader.sample():
            sample.t = float(i)  # one second apart
            samples.append(sample)
    return samples


def test_energy_per_token_and_tokens_per_watt_from_the_power_samples():
    quiet = RECORDED["readings"][:2]
    summary = summarize_gpu(samples_of(quiet), {4242}, completion_tokens=1000, wall_s=1.0)
    assert abs(summary["gpu_energy_j"] - (412 + 655) / 2) < 1e-6  # one second between the two readings
    assert abs(summary["joules_per_token"] - 0.5335) < 1e-6
    assert abs(summary["tok_s_per_w"] - 1000 / 533.5) < 1e-6
    assert summary["gpu_throttle"] == "" and summary["gpu_foreign_pids"] == ""


def test_a_power_capped_cell_is_marked_and_a_foreign_process_is_named():
    summary = summarize_gpu(samples_of(RECORDED["readings"]), {4242}, completion_tokens=1000, wall_s=3.0)
    assert summary["gpu_throttle"] == "sw_power_cap"
    assert summary["gpu_foreign_pids"] == "777"
    assert 1700 < summary["gpu_sm_clock_mhz"] < 1980


def test_no_nvml_means_not_checked():
    class Missing:
        def nvmlInit(self):
            raise OSError("NVML Shared Library Not Found")

    reader = NvmlReader(Missing())
    assert not reader.available
    with GpuSampler(reader) as sampler:
        pass
    assert sampler.samples == []
    assert summarize_gpu([], set(), 10, 1.0)["gpu_energy_j"] is None


def test_the_sampler_thread_samples_during_the_cell():
    reader = NvmlReader(RecordedNvml(RECORDED["readings"] * 50))
    import time

    with GpuSampler(reader, interval_s=0.01) as sampler:
        time.sleep(0.08)
    assert len(sampler.samples) >= 3 and all(s.power_limit_w == 700.0 for s in sampler.samples)
