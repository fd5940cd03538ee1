"""The judged metrics: one row each, read by verdict rules, verdicts, search objectives, browsing and the site.

A metric is a column of cells.parquet measured by one cell kind (measure/kinds/); its row says in which direction
it regresses and which selectors a rule may narrow its cells by. How it reads in a reason and its unit are its
column's (config.columns). Adding a judged metric is a name in `Metric` and its row here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .columns import column

Metric = Literal["aggregate_tok_s", "steady_tok_s", "per_request_tok_s", "ttft_s", "ttft_p90_s", "prefill_tok_s",
                 "capacity_rps", "next_turn_ttft_s", "replay_ttft_p90_s", "measured_hit_rate", "answer_ttft_s",
                 "reasoning_tok_s", "answer_tok_s", "itl_p99_s", "probe_itl_p99_s", "probe_ttft_p95_s",
                 "session_p95_turn_ttft_s", "session_turns_per_s"]
Selector = Literal["concurrency", "category", "prompt_tokens"]


@dataclass(frozen=True)
class JudgedMetric:
    """One judged figure: its column, the cell kind whose cells it is judged in, and its direction."""

    name: str
    kind: str
    direction: Literal["lower", "higher"]
    #: the selectors a rule may narrow this metric's cells by (none: every cell of the kind is judged)
    selects: tuple[Selector, ...] = ("concurrency", "category")
    #: where a comparison of it is, in words, when no selector says (a run has one capacity)
    where: str | None = None
    #: why a rule on it selects no cells, where `selects` is empty
    no_selectors: str = ""
    #: whether adding complete replicas is meant to multiply it (what a scaling rule may judge, config.scaling)
    scales: bool = False
    #: the part of the kind's plan section that must be set for its cells to carry it ("probes": plan.prefill.probes)
    needs: str | None = None

    @property
    def column(self) -> str:
        """The cells.parquet column it is read from (its name: a rule names the column it judges)."""
        return self.name

    @property
    def words(self) -> str:
        """How it reads in a reason: its column's phrase."""
        return column(self.name).words

    @property
    def unit(self) -> str:
        return column(self.name).unit

    @property
    def lower_is_better(self) -> bool:
        return self.direction == "lower"


METRICS: dict[str, JudgedMetric] = {m.name: m for m in (
    JudgedMetric("aggregate_tok_s", "decode", "higher", scales=True),
    JudgedMetric("steady_tok_s", "decode", "higher", scales=True),
    JudgedMetric("per_request_tok_s", "decode", "higher"),
    JudgedMetric("ttft_s", "decode", "lower"),
    JudgedMetric("ttft_p90_s", "decode", "lower"),
    JudgedMetric("prefill_tok_s", "prefill", "higher", selects=("prompt_tokens",)),
    JudgedMetric("capacity_rps", "capacity", "higher", selects=(),
                 where="per run", no_selectors="a run has one capacity (plan.capacity)", scales=True),
    # the median TTFT of a reuse cell's later turns, whose earlier turns the engine may have cached: what a prefix
    # cache (or its absence) costs an agent's next turn
    JudgedMetric("next_turn_ttft_s", "reuse", "lower", selects=(), where="prompt reuse",
                 no_selectors="they judge every reuse cell (plan.reuse)"),
    # a trace replayed at its own arrivals (plan.replay): how long its requests waited for a first token, and how
    # much of its prompts the engine's prefix cache served (the trace's ideal is beside it in the cell)
    JudgedMetric("replay_ttft_p90_s", "replay", "lower", selects=(), where="trace replay",
                 no_selectors="a run replays one trace (plan.replay)"),
    JudgedMetric("measured_hit_rate", "replay", "higher", selects=(),
                 where="trace replay", no_selectors="a run replays one trace (plan.replay)"),
    # a reasoning model's (measure/figures/reasoning.py): the median wait for the first answer token, thinking included (the
    # TTFT where nothing reasons, so a candidate that thinks less is judged against one that thinks more), and each
    # phase's median per-request decode rate; chat decode cells only (a completion of a token prompt has no answer)
    JudgedMetric("answer_ttft_s", "decode", "lower"),
    JudgedMetric("reasoning_tok_s", "decode", "higher"),
    JudgedMetric("answer_tok_s", "decode", "higher"),
    # the 99th percentile of a decode cell's chunk gaps (measure.figures.itl): the stalls a user reading the stream feels
    JudgedMetric("itl_p99_s", "decode", "lower"),
    # interference probes beside each prefill (measure.kinds.prefill.probes): the decode stall a prefill chunk
    # causes, and how long a short request waits behind it
    JudgedMetric("probe_itl_p99_s", "prefill", "lower",
                 selects=("prompt_tokens",), needs="probes"),
    JudgedMetric("probe_ttft_p95_s", "prefill", "lower",
                 selects=("prompt_tokens",), needs="probes"),
    # agent sessions (plan.agents): per session the p95 of its turns' TTFTs, the median over sessions; and turns per
    # second of a session's duration, think times included (the pace a user's agent keeps)
    JudgedMetric("session_p95_turn_ttft_s", "agents", "lower", selects=(),
                 where="agent sessions", no_selectors="they judge every agents cell (plan.agents)"),
    JudgedMetric("session_turns_per_s", "agents", "higher", selects=(),
                 where="agent sessions", no_selectors="they judge every agents cell (plan.agents)"),
)}

def measured_by(metric: Metric) -> str:
    """The cell kind a metric is read from: its cells carry the figure, and the columns that come with it (a
    capacity's interval and probes), as the rules judge it."""
    return METRICS[metric].kind


#: the metrics whose regression is a rise (times); the rest regress by falling (rates)
LOWER_IS_BETTER = frozenset(name for name, m in METRICS.items() if m.lower_is_better)
#: how each metric reads in a reason
METRIC_WORDS = {name: m.words for name, m in METRICS.items()}


def selector_problem(metric: str, concurrency: list[int] | None, category: str | None,
                     prompt_tokens: list[int] | None) -> str | None:
    """Why a rule on `metric` cannot narrow its cells by the selectors it gives; None when it can."""
    selects = METRICS[metric].selects
    given = [name for name, value in (("concurrency", concurrency), ("category", category),
                                      ("prompt_tokens", prompt_tokens)) if value]
    if not selects and given:
        return f"{metric} rules select no cells: {METRICS[metric].no_selectors}"
    if selects == ("prompt_tokens",) and (concurrency or category):
        return f"{metric} rules select cells by prompt_tokens, not concurrency/category"
    if "prompt_tokens" not in selects and prompt_tokens:
        return f"{metric} rules select cells by concurrency/category, not prompt_tokens"
    return None
