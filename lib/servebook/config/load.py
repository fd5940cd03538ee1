"""Open-loop load and service-level objectives: requests arrive on a schedule, whatever the engine's pace, and
each request either meets the objectives or does not (DistServe's attainment; goodput is the rate of those that do).

Closed-loop cells (decode) measure what an engine does at a fixed number of requests in flight; users do not wait
for each other, so the load a deployment holds within its objectives is a question of arrival rates.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from .strict import StrictModel

#: the highest request rate a plan may ask for: 64 sending processes (the most `client_processes` allows) at the
#: 150 requests/s one process keeps up with at best (measure/transport/senders.py) offer 9,600 requests/s; a higher rate
#: measures only the client falling behind (client_lag), after building its whole schedule of arrivals in memory
#: (1e9 requests/s never got past that)
MAX_RATE_RPS = 10_000.0
#: the longest a capacity probe's window may be (the limit of probe_s and load.duration_s): the first probe waits
#: for min_requests arrivals at low_rps, so a tiny low_rps (0.001) made it wait for hours
MAX_PROBE_WINDOW_S = 3600.0


class Lengths(StrictModel):
    """Token lengths drawn per request: `fixed` (the mean), `uniform` on [low, high], or `lognormal` with a mean and a
    coefficient of variation (long-tailed, as chat and agent traffic is), clipped to [low, high]."""

    distribution: Literal["fixed", "uniform", "lognormal"] = "fixed"
    mean: int = Field(256, ge=1)
    low: int | None = Field(None, ge=1)
    high: int | None = Field(None, ge=1)
    cv: float = Field(0.5, gt=0, le=4, description="lognormal: standard deviation over mean")

    @model_validator(mode="after")
    def _bounds(self) -> "Lengths":
        if self.distribution == "uniform" and (self.low is None or self.high is None):
            raise ValueError("a uniform length needs low and high")
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"low {self.low} is above high {self.high}")
        return self

    @property
    def longest(self) -> int:
        if self.distribution == "fixed":
            return self.mean
        return self.high or (self.mean * 8 if self.distribution == "lognormal" else self.mean)


def _lengths(value: object) -> object:
    return {"mean": value} if isinstance(value, int) and not isinstance(value, bool) else value


class LoadPlan(StrictModel):
    """Open-loop cells, one per request rate: arrivals on a seeded schedule (Poisson, or gamma with a burstiness
    above 1), a warm-up whose requests are sent but not counted, then the measured window."""

    rates_rps: list[float] = Field(default_factory=list, description="request rates, one cell each (requests/s); "
                                                                     "none when only a capacity search uses it")
    arrival: Literal["poisson", "gamma"] = "poisson"
    burstiness: float = Field(1.0, gt=0, le=10, description="gamma: the inter-arrival times' CV (1 is Poisson; "
                                                            "above 1, bursts)")
    warmup_s: float = Field(2.0, ge=0, le=600)
    duration_s: float = Field(10.0, gt=0, le=3600, description="the measured window")
    prompt_tokens: Lengths = Lengths(mean=256)
    output_tokens: Lengths = Lengths(mean=64)
    trace: str | None = Field(None, description="a JSONL trace (Mooncake-style: timestamp in ms, input_length, "
                                                "output_length per line): its arrivals and lengths replace the "
                                                "drawn ones, its rate scaled to each of rates_rps")
    max_lag_ms: float = Field(50.0, gt=0, description="more than 5% of requests sent later than this after they "
                                                       "were due make the cell invalid (client_lag): the client, "
                                                       "not the engine, set the pace")
    seed: int = Field(0, ge=0, le=2**32 - 1, description="the seed every drawn figure comes from")
    client_processes: int | None = Field(None, ge=1, le=64, description="processes sending the load; unset: one "
                                                                         "per 40 requests/s or 1,500 "
                                                                         "streamed chunks/s, on at most half the "
                                                                         "cores (measure.transport.senders)")

    # json_schema_input_type: the JSON Schema (config.schemas) accepts the number too
    @field_validator("prompt_tokens", "output_tokens", mode="before", json_schema_input_type=Lengths | int)
    @classmethod
    def _length_or_number(cls, value: object) -> object:
        return _lengths(value)  # `prompt_tokens: 512` is a fixed length

    @field_validator("rates_rps")
    @classmethod
    def _rates(cls, v: list[float]) -> list[float]:
        if any(r <= 0 for r in v) or sorted(set(v)) != list(v):
            raise ValueError(f"rates_rps must be positive and strictly ascending, got {v}")
        if any(r > MAX_RATE_RPS for r in v):
            raise ValueError(f"rates_rps: at most {MAX_RATE_RPS:,.0f} requests/s, got {max(v):g} (the most the client's "
                             "sending processes can offer; above it a cell measures the client, not the engine)")
        return v

    @model_validator(mode="after")
    def _arrival(self) -> "LoadPlan":
        if self.arrival == "poisson" and self.burstiness != 1.0:
            raise ValueError("burstiness is for gamma arrivals (Poisson's is 1)")
        if self.output_tokens.distribution != "fixed" and (self.output_tokens.low or 2) < 2:
            raise ValueError("output_tokens: at least 2 tokens per request, so that every request has an "
                             "inter-token time")
        return self


class ServiceObjectives(StrictModel):
    """What a user must get, per request: a first token within `ttft_s`, then tokens at most `tpot_s` apart on
    average, and the whole answer within `e2e_s` (each optional); `attainment`: the share of requests that must
    meet all of them (0.9: a P90 objective)."""

    ttft_s: float | None = Field(None, gt=0)
    tpot_s: float | None = Field(None, gt=0, description="time per output token after the first, per request")
    e2e_s: float | None = Field(None, gt=0)
    attainment: float = Field(0.9, gt=0, le=1)

    @model_validator(mode="after")
    def _some(self) -> "ServiceObjectives":
        if self.ttft_s is None and self.tpot_s is None and self.e2e_s is None:
            raise ValueError("slo: name at least one of ttft_s, tpot_s, e2e_s")
        return self

    def describe(self) -> str:
        parts = [f"TTFT <= {self.ttft_s:g} s" if self.ttft_s else "", f"TPOT <= {1000 * self.tpot_s:g} ms"
                 if self.tpot_s else "", f"end to end <= {self.e2e_s:g} s" if self.e2e_s else ""]
        return f"{', '.join(p for p in parts if p)} for {100 * self.attainment:g}% of requests"


class CapacitySearch(StrictModel):
    """The highest request rate at which the plan's objectives hold: open-loop probes (the load section's arrivals
    and lengths, each probe a cell of `probe_s`), in steps of x4 from `low_rps` until the objectives fail, then
    bisecting until the bracket is within `precision_pct`, at most `max_probes` probes in all."""

    low_rps: float = Field(1.0, gt=0, le=MAX_RATE_RPS)
    high_rps: float = Field(1024.0, gt=0, le=MAX_RATE_RPS, description=f"at most {MAX_RATE_RPS:,.0f} requests/s, "
                                                                      "what the client's processes can offer")
    precision_pct: float = Field(5.0, gt=0, le=100)
    max_probes: int = Field(12, ge=2, le=64)
    probe_s: float | None = Field(None, gt=0, le=3600, description="each probe's measured window (default: "
                                                                    "load.duration_s)")
    min_requests: int = Field(50, ge=10, le=100_000, description="a probe's window grows to hold this many arrivals, "
                                                                 "so that its attainment means something")
    narrowing_requests: int = Field(800, ge=10, le=1_000_000,
                                    description="arrivals each probe inside the bracket holds: near the capacity a "
                                                "window's attainment rests on whether it caught a burst. Against the "
                                                "simulator's truth, 80 put the capacity within 5% in 4 of 30 "
                                                "searches, 800 in 25 of 30 (benchmarks/capacity_truth.py)")

    @model_validator(mode="after")
    def _range(self) -> "CapacitySearch":
        if self.low_rps >= self.high_rps:
            raise ValueError(f"low_rps {self.low_rps:g} must be below high_rps {self.high_rps:g}")
        first_window = self.min_requests / self.low_rps
        if first_window > MAX_PROBE_WINDOW_S:
            raise ValueError(f"low_rps {self.low_rps:g}: the first probe would wait {first_window:,.0f} s for its "
                             f"{self.min_requests} arrivals (min_requests); at most {MAX_PROBE_WINDOW_S:g} s, so "
                             f"low_rps >= {self.min_requests / MAX_PROBE_WINDOW_S:.3g}")
        return self


class ReplayPlan(StrictModel):
    """A request trace replayed at its own arrivals (scaled by `time_scale`), its prefix structure honoured: in a
    Mooncake trace every hash id stands for one block of `block_tokens` prompt tokens, the same tokens wherever it
    occurs in the run (config.traces, measure.kinds.replay.blocks). One cell, every request of it measured."""

    trace: str = Field(description="a JSONL trace: a path, shipped:NAME (data/traces/) or an fsspec URL; Mooncake "
                                   "lines (timestamp in ms, input_length, output_length, hash_ids) or the plain "
                                   "format (timestamp, prompt_tokens, output_tokens)")
    time_scale: float = Field(1.0, gt=0, le=1000, description="arrival times multiplied by this (0.5: twice as fast)")
    max_requests: int | None = Field(None, ge=1, le=100_000, description="replay only the first this many requests")
    max_duration_s: float | None = Field(None, gt=0, le=3600, description="replay only the requests due within "
                                                                          "this long (after scaling)")
    block_tokens: int = Field(512, ge=16, le=65_536, description="prompt tokens per hash id (Mooncake's are 512)")
    max_lag_ms: float = Field(50.0, gt=0, description="as load.max_lag_ms: more than 5% of requests sent later "
                                                       "than this after they were due make the cell invalid")
