"""The measured figures a change may show up in beside the judged ones: what `verdicts.side_effects` compares for
every cell that carries them, so that a recommendation is read with what it costs where no rule looks.

Each figure is a column of cells.parquet, with the words a reader knows it by (its column's, config.columns) and
the direction in which it gets worse. The judged metrics (config.metrics) come first, in their own words, so that
where two columns say the same thing of one cell (a decode cell's `ttft_s` and `ttft_p50_ms` are both its TTFT
p50) the judged one is the one read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .columns import column
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
#: the latency percentiles measure.figures.latency writes (milliseconds) and the load and ITL kinds' own (seconds)
_PERCENTILES = [f"{name}_{stat}_ms" for name in ("ttft", "tpot", "itl", "e2e") for stat in ("p50", "p90", "p99")]
_PERCENTILES += ["ttft_p50_s", "tpot_p50_s", "tpot_p90_s", "e2e_p90_s", "itl_p50_s", "itl_p95_s"]
_OTHERS: tuple[tuple[str, Literal["lower", "higher"]], ...] = (
    ("first_turn_ttft_s", "lower"), ("goodput_rps", "higher"), ("slo_attainment", "higher"),
    ("draft_acceptance", "higher"), ("kv_usage_peak", "lower"), ("joules_per_token", "lower"))

FIGURES: tuple[Figure, ...] = (
    *(Figure(m.name, _SHORTER.get(m.name, m.words), m.direction) for m in METRICS.values()),
    *(Figure(name, column(name).words, "lower") for name in _PERCENTILES),
    *(Figure(name, column(name).words, direction) for name, direction in _OTHERS),
)
