"""The measured figures a change may show up in beside the judged ones: what `verdicts.side_effects` compares for
every cell that carries them, so that a recommendation is read with what it costs where no rule looks.

Each figure is a column of cells.parquet, with the words a reader knows it by and the direction in which it gets
worse. The judged metrics (config.metrics) come first, in their own words, so that where two columns say the same
thing of one cell (a decode cell's `ttft_s` and `ttft_p50_ms` are both its TTFT p50) the judged one is the one read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .metrics import METRICS


@dataclass(frozen=True)
class Figure:
    column: str
    words: str
    direction: Literal["lower", "higher"]

    @property
    def lower_is_better(self) -> bool:
        return self.direction == "lower"


#: how a judged metric reads as a side effect, where its reason's words do not say which percentile it is
_SHORTER = {"ttft_s": "TTFT p50", "aggregate_tok_s": "decode", "prefill_tok_s": "prefill"}
#: the latency percentiles measure.latency writes (milliseconds) and the load and ITL kinds' own (seconds)
_PERCENTILES = [(f"{name}_{stat}_ms", f"{words} {stat}") for name, words in
                (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2e", "E2E")) for stat in ("p50", "p90", "p99")]
_PERCENTILES += [("ttft_p50_s", "TTFT p50"), ("tpot_p50_s", "TPOT p50"), ("tpot_p90_s", "TPOT p90"),
                 ("e2e_p90_s", "E2E p90"), ("itl_p50_s", "ITL p50"), ("itl_p95_s", "ITL p95")]

FIGURES: tuple[Figure, ...] = (
    *(Figure(m.name, _SHORTER.get(m.name, m.words), m.direction) for m in METRICS.values()),
    *(Figure(column, words, "lower") for column, words in _PERCENTILES),
    Figure("first_turn_ttft_s", "first-turn TTFT", "lower"),
    Figure("goodput_rps", "goodput", "higher"),
    Figure("slo_attainment", "SLO attainment", "higher"),
    Figure("draft_acceptance", "drafter acceptance", "higher"),
    Figure("kv_usage_peak", "peak KV cache use", "lower"),
    Figure("joules_per_token", "energy per token", "lower"),
)
