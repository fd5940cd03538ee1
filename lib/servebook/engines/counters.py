"""Prometheus snapshots of an engine's counters, and how far a counter moved between two of them."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Literal

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


@dataclass
class Scrape:
    """One read of /metrics. `available` is False when the endpoint is off or unreachable."""

    t: float
    samples: list[Sample] = field(default_factory=list)
    available: bool = True
    error: str | None = None

    def total(self, name: str, *aliases: str, where: frozenset[tuple[str, str]] = frozenset()) -> float | None:
        """Sum of a metric across labels (those of its series that carry every label of `where`), trying renamed
        spellings in order; None if absent."""
        for candidate in (name, *aliases):
            values = [s.value for s in self.samples if s.name == candidate and where <= set(s.labels)]
            if values:
                return float(sum(values))
        return None

    def by_label(self, name: str, label: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for s in self.samples:
            if s.name == name:
                key = dict(s.labels).get(label, "")
                out[key] = out.get(key, 0.0) + s.value
        return out


def counter_delta(before: Scrape, after: Scrape, name: str, *aliases: str,
                  where: frozenset[tuple[str, str]] = frozenset()) -> float | None:
    """How much a counter moved between two scrapes (its series carrying every label of `where`); None when either
    scrape lacks it."""
    a, b = after.total(name, *aliases, where=where), before.total(name, *aliases, where=where)
    return None if a is None or b is None else a - b


def lazy_counter_delta(before: Scrape, after: Scrape, name: str, *, counting: str) -> float | None:
    """`counter_delta` for an engine that creates a counter's labelled child at its first use (SGLang): while the
    engine is counting at all (`counting`, a counter every request moves, is in the later scrape), a counter a
    scrape lacks has counted nothing yet, so it reads as 0 there. None when the engine counts nothing."""
    if after.total(counting) is None:
        return None
    a, b = after.total(name), before.total(name)
    return (a or 0.0) - (b or 0.0) if before.available else None


_SELECTOR = re.compile(r'^(?P<name>[^{]+)(?:\{(?P<labels>.*)\})?$')
_MATCHER = re.compile(r'(\w+)\s*=\s*"([^"]*)"')


def histogram_mean(before: Scrape, after: Scrape, name: str) -> float | None:
    """The mean of what a Prometheus histogram observed between two scrapes (change in _sum over change in
    _count, summed across labels); None when either scrape lacks it or nothing was observed. `name` may select
    series by label as PromQL writes it: `sglang:per_stage_req_latency_seconds{stage="prefill_forward"}`."""
    parts = _SELECTOR.match(name)
    base = parts["name"] if parts else name
    where = frozenset(_MATCHER.findall(parts["labels"] or "")) if parts else frozenset()
    total = counter_delta(before, after, f"{base}_sum", where=where)
    count = counter_delta(before, after, f"{base}_count", where=where)
    return None if total is None or not count else total / count


def parse_metrics(text: str, t: float | None = None) -> Scrape:
    samples = [
        Sample(s.name, tuple(sorted(s.labels.items())), float(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]
    return Scrape(t=time.monotonic() if t is None else t, samples=samples)


#: what servebook samples of an engine's load while a cell runs: the share of its KV cache in use (0-1), the
#: requests it runs and those it holds waiting, and the running requests it preempted (a counter)
GaugeName = Literal["kv_usage", "running", "waiting", "preemptions"]


@dataclass(frozen=True)
class Gauge:
    """One of an engine's load gauges, as its adapter names it: the Prometheus samples that carry it (renamed
    spellings in order), how values over labels (tensor-parallel ranks, replicas) combine, and whether it is a
    counter that the engine creates at its first use (absent: nothing counted yet)."""

    name: GaugeName
    metrics: tuple[str, ...]
    #: "sum" for counts of requests, "max" for a usage share (the fullest rank or replica is the one that queues)
    across: Literal["sum", "max"] = "sum"
    counter: bool = False
    lazy: bool = False

    def read(self, scrape: Scrape) -> float | None:
        """Its value in one scrape; None where the scrape has none of its samples (a lazy counter reads 0 in an
        available scrape of a server that counts)."""
        for metric in self.metrics:
            values = [s.value for s in scrape.samples if s.name == metric]
            if values:
                return float(max(values) if self.across == "max" else sum(values))
        return 0.0 if self.lazy and scrape.available and scrape.samples else None

    def delta(self, before: Scrape, after: Scrape) -> float | None:
        """How far a counter gauge moved between two scrapes (None: not in both)."""
        a, b = self.read(after), self.read(before)
        return None if a is None or b is None else a - b


def gauge_names(gauges: tuple[Gauge, ...]) -> frozenset[str]:
    return frozenset(metric for gauge in gauges for metric in gauge.metrics)


def parse_only(text: str, names: frozenset[str], t: float | None = None) -> Scrape:
    """`parse_metrics` of only the samples named `names`: a vLLM /metrics page is hundreds of histogram lines, and
    parsing all of it four times a second would take the measuring client's CPU. Comment lines go too: without its
    TYPE line a sample keeps its full name (`vllm:num_preemptions_total`), which is what `Gauge` reads."""
    kept = [line for line in text.splitlines()
            if line and line[0] != "#" and line.split("{", 1)[0].split(" ", 1)[0] in names]
    return parse_metrics("\n".join(kept) + "\n", t) if kept else Scrape(t=time.monotonic() if t is None else t)
