"""The engine's load while a cell runs: its KV cache usage, running and waiting requests and preemptions, read
from /metrics every `plan.gauge_interval_ms` by a task beside the cell's requests.

Which samples carry each gauge is the engine adapter's (`EngineAdapter.gauges`). Each poll parses only those
samples (engines.counters.parse_only): the poll runs on the measuring client's event loop, so parsing all of a
vLLM /metrics page (25 ms for its 379 lines, against 0.9 ms for the gauges' samples) would delay the chunks it
times. Polls never overlap; a poll that fails is counted and the next
one follows. The samples of one cell are bounded: at `max_samples` every other one is dropped and the interval
doubles, so a long cell keeps its whole span at a coarser step. Preemptions during the cell are the counter's move
between the scrapes on either side of it (exact, sampled or not).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

import httpx

from ...engines.counters import Gauge, Scrape, gauge_names, parse_only

if TYPE_CHECKING:
    from ..cells import CellSummary

#: the gauge columns a cell row gets (None: not sampled, or the engine exports no such gauge)
GAUGE_COLUMNS = ("kv_usage_peak", "running_peak", "waiting_peak", "preemptions", "gauge_samples")
#: a cell's samples at most (ten minutes at 250 ms) before they are thinned
MAX_SAMPLES = 2400


def gauge_client(headers: dict[str, str]) -> httpx.AsyncClient:
    """The sampler's own HTTP client: its connections kept alive between polls, which halves a poll's CPU on the
    client (about 2 ms instead of 3-4 against llama-server), unlike the measured requests' client, which opens one
    per request. A connection the engine closed meanwhile fails one poll, which is counted and followed by the
    next."""
    return httpx.AsyncClient(headers=headers, limits=httpx.Limits(max_connections=16, max_keepalive_connections=16))


@dataclass(frozen=True)
class GaugeSample:
    """One poll: when (monotonic seconds, the requests' clock: the middle of the poll) and each gauge's value."""

    t: float
    values: dict[str, float]


@dataclass
class GaugeSampler:
    """Polls the engine's gauges while the cell runs (`async with`); nothing where `interval_s` is None or the
    engine exports no gauge."""

    http: httpx.AsyncClient
    urls: tuple[str, ...]
    gauges: tuple[Gauge, ...]
    interval_s: float | None
    max_samples: int = MAX_SAMPLES
    samples: list[GaugeSample] = field(default_factory=list, init=False)
    #: polls that got no answer (the cell is not judged on them)
    failures: int = field(default=0, init=False)
    #: the time between polls: the interval, doubled each time the samples are thinned
    step_s: float = field(default=0.0, init=False)
    _task: asyncio.Task | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.step_s = self.interval_s or 0.0

    @property
    def enabled(self) -> bool:
        return bool(self.interval_s and self.gauges and self.urls)

    async def __aenter__(self) -> "GaugeSampler":
        if self.enabled:
            self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            await self.poll()
            await asyncio.sleep(max(0.0, self.step_s - (time.monotonic() - started)))

    async def poll(self) -> None:
        """One reading of every URL's gauges, kept as one sample (values combined over URLs as over labels)."""
        started = time.monotonic()
        texts = await asyncio.gather(*(self._text(url) for url in self.urls))
        t = (started + time.monotonic()) / 2
        found = [text for text in texts if text is not None]
        self.failures += len(texts) - len(found)
        if found:
            names = gauge_names(self.gauges)
            scrape = Scrape(t=t, samples=[s for text in found for s in parse_only(text, names, t).samples])
            values: dict[str, float] = {g.name: v for g in self.gauges if (v := g.read(scrape)) is not None}
            if values:
                self.samples.append(GaugeSample(t, values))
        if len(self.samples) >= self.max_samples:
            self.samples = self.samples[::2]
            self.step_s *= 2

    async def _text(self, url: str) -> str | None:
        try:
            response = await self.http.get(f"{url}/metrics", timeout=max(2.0, 4 * (self.interval_s or 0.0)))
        except httpx.HTTPError:
            return None
        return response.text if response.status_code == 200 else None

    def rows(self, cell_id: str) -> list[dict[str, Any]]:
        """gauges.parquet's rows of this cell: one per sample and gauge."""
        return [{"cell_id": cell_id, "t": s.t, "name": name, "value": value}
                for s in self.samples for name, value in s.values.items()]


def gauge_figures(sampler: GaugeSampler, before: Scrape, after: Scrape) -> "CellSummary":
    """The cell row's summary of its gauges: the highest KV usage, running and waiting requests sampled, the
    preemptions between the scrapes on either side of the cell, and how many samples there were."""

    def peak(name: str) -> float | None:
        values = [s.values[name] for s in sampler.samples if name in s.values]
        return max(values) if values else None

    counter = next((g for g in sampler.gauges if g.counter and g.name == "preemptions"), None)
    moved = counter.delta(before, after) if counter is not None else None
    figures: CellSummary = {
        "kv_usage_peak": peak("kv_usage"), "running_peak": peak("running"), "waiting_peak": peak("waiting"),
        "preemptions": moved, "gauge_samples": len(sampler.samples) if sampler.enabled else None}
    return figures
