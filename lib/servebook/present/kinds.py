"""What the present layer shows of each cell kind, keyed by the kinds' names (measure/kinds/): its run table, its
site section and definitions, its estimate table over runs, its side-by-side figures, and its charts.

Entries are data: the one table builder (tables.py) and the chart builder (figures.py) read them, in the order of
this registry (estimates and side-by-side figures in `summary_rank` order). Open-loop load and capacity are drawn
by load_tables.py and frontier.py, which read their own columns; their entries only mark them open-loop.

A column's title, format and definition are its catalogue entry's (config.columns): a table names a column in its own
words only where its kind reads it so (a prefill cell's TTFT is its "First token").
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.columns import column

#: how a column's figures read: a number format (with `scale` and `suffix`), "int" (a count, "-" where missing),
#: "text" (a word as recorded), or "check" (the cell's validity and reconciliation)
Format = str


@dataclass(frozen=True)
class Column:
    title: str
    column: str
    format: Format = ".1f"
    scale: float = 1.0
    suffix: str = ""
    #: shown only where some cell of the table has a value in this column (figures only some runs have: a reasoning
    #: model's); None: always shown
    shown_with: str | None = None


@dataclass(frozen=True)
class RunTable:
    """The kind's cells of a run (or of runs side by side), one row per cell."""

    title: str
    columns: tuple[Column, ...]
    #: the cell columns rows are sorted by (after the runs' order when several runs share the table)
    sort: tuple[str, ...]
    #: one table per prompt category, titled with it ("{category}" in `title`)
    by_category: bool = False


@dataclass(frozen=True)
class EstimateTable:
    """Each candidate's figure over runs (present.tables.estimate_text), per value of `key`."""

    title: str
    key: str
    key_title: str
    columns: tuple[Column, ...]
    by_category: bool = False


@dataclass(frozen=True)
class LineChart:
    """One line per candidate of `y` against `x` (figures._line_spec)."""

    x: str
    y: str
    title: str
    x_title: str
    y_title: str
    scale: float = 1.0
    #: one panel per prompt category, side by side
    split_category: bool = False
    #: x ticks in doublings (1, 2, 4, 8), else at the measured values only
    log2_ticks: bool = False


@dataclass(frozen=True)
class Section:
    title: str
    definitions: list[str]
    #: (column, definition): shown only where some cell of the kind has a value in that column
    when_present: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class PresentKind:
    table: RunTable | None = None
    section: Section | None = None
    estimates: EstimateTable | None = None
    #: (title, column, format, scale) of the figures compared side by side, a column per candidate
    compared: tuple[tuple[str, str, str, float], ...] = ()
    charts: tuple[LineChart, ...] = ()
    #: a per-turn chart from the requests (figures.turn_ttft_spec), not from the cells
    turn_chart: bool = False
    #: a session view per run from the requests (present/sessions.py): turns against time, context, cached share
    session_view: bool = False
    #: charts drawn, empty, for runs that measured none of this kind (unless they measured only open-loop load)
    drawn_unmeasured: bool = False
    #: the kinds whose rows only open-loop runs have: runs with nothing else get no empty closed-loop charts
    open_loop: bool = False
    #: where its estimates and side-by-side figures come among the kinds' (ascending; ties in registry order)
    summary_rank: int = 100
    #: its cells' chunk gaps go into the run's ITL distribution (figures.chunk_gap_spec)
    gap_histogram: bool = False


CHECK = Column("Check", "", "check")


def shown(name: str, title: str | None = None, shown_with: str | None = None) -> Column:
    """A cells.parquet column in a run table, as its catalogue entry shows it; `title`: the kind's own words for it."""
    entry = column(name)
    return Column(title or entry.title, name, entry.format, entry.scale, entry.suffix, shown_with)


def estimated(name: str, title: str | None = None, fmt: str | None = None, shown_with: str | None = None) -> Column:
    """A cells.parquet column in an estimate table: its unit in the heading ("TTFT ms"), the figures bare."""
    entry = column(name)
    if entry.format.endswith("%"):  # a share: in percent, the sign in the heading
        number, scale, unit = entry.format[:-1] + "f", 100.0, " %"
    else:
        number, scale, unit = entry.format, entry.scale, entry.suffix
    return Column((title or entry.title) + unit, name, fmt or number, scale, "", shown_with)


def defined(name: str) -> str:
    """A column's definition as a table's notes give it: its title, then what it is."""
    entry = column(name)
    return f"{entry.title}: {entry.definition}"


#: the cells.parquet column that says a cell's streams reasoned (measure/figures/reasoning.py): its figures
#: show where it is set
REASONED = "reasoning_split"
REASONING_DEFINITIONS = (
    (REASONED, "Reasoning models: a chat stream's thinking arrives in reasoning_content or reasoning deltas, its answer "
               "in content. Answer TTFT: median time from send to the first answer chunk (TTFT counts the first "
               "chunk of either). Reasoning / answer tokens: sums over the cell; a request's reasoning count is the "
               "engine's own (usage) where it reports one, else counted from per-chunk usage; answer tokens are the "
               "rest of its completion tokens. Reasoning / answer tok/s: medians over requests of (tokens - 1) / "
               "(last - first chunk of that phase)."),
    (REASONED, "The engine's generation counter counts thinking and answer alike: where every stream's reasoning "
               "count is known the check is reasoning + answer against it; where one is not, the cell is reconciled "
               "on the total only, and says so (docs/reasoning.md)."),
)
#: a drafter's own evidence, from the engine's counts: shown where some cell has them (a run with a drafter)
DRAFT_COLUMNS = (
    *(shown(name, shown_with="draft_tokens") for name in
      ("draft_tokens", "draft_accepted_tokens", "draft_acceptance", "tokens_per_step")),
    shown("draft_source", shown_with="draft_source"),
)
DRAFT_DEFINITION = ("draft_tokens", "Drafted tokens: the tokens the engine's drafter proposed during the cell, from its "
                    "own counts; Accepted tokens: those the target model kept; Accepted: their share; Tokens/step: "
                    "completion tokens over (completion - accepted), the tokens each forward pass of the target "
                    "emitted (1 without a drafter). A drafter that proposed nothing (an n-gram drafter on text that "
                    "never repeats its prompt) costs its overhead and gains nothing. Acceptance 'synthetic': "
                    "llama.cpp was told how often to accept (drafter.synthetic_*), so the rate is set, not earned.")
#: what the output of a decode cell was like (measure.figures.realism): shown where it was measured
REALISM_COLUMNS = tuple(shown(name, shown_with="ngram_share")
                        for name in ("ngram_share", "loop_share", "forced_tail_share"))
REALISM_DEFINITION = (
    "ngram_share", "Output realism (docs/metrics.md): N-gram share: of the generated tokens, those an n-gram lookup "
                   "over the prompt and the output so far predicts (2 to 4 tokens, as the engine tokenizes the text): "
                   "what a prompt-lookup drafter lives on. Loop share: the same lookup over the output alone, the "
                   "output repeating itself. Forced tail: the share of the forced length past where the model, asked "
                   "again greedily without a forced length, stopped on its own. A loop or forced tail of 50% or more "
                   "marks a drafter's gain in that cell (verdict code gain_on_unrealistic_output).")
REASONING_COLUMNS = tuple(shown(name, shown_with=REASONED) for name in
                          ("answer_ttft_s", "reasoning_tokens", "answer_tokens", "reasoning_tok_s", "answer_tok_s"))

DECODE_DEFINITIONS = [
    *(defined(name) for name in ("aggregate_tok_s", "per_request_tok_s", "ttft_s")),
    "Output length is forced (ignore_eos + max_tokens) and checked per request; a wrong length makes the cell "
    "invalid.",
    "Reconciliation: the engine's prompt, cached and generated token counters over the cell must equal the client's "
    "usage sums; otherwise the cell is invalid and says by how much.",
]
PREFILL_DEFINITIONS = [
    "Cold prefill tok/s: prompt_tokens / TTFT with max_tokens=1 and a unique first token per request, so nothing "
    "is cached; includes scheduling and first-token overhead. Verified cold by the cached-token counters.",
    "First token: median TTFT of those requests.",
]
REUSE_DEFINITIONS = [
    "Each conversation's turn resends the whole conversation so far plus new tokens, as agents do; conversations "
    "run one after another and start with their own first token, so turn 1 is cold.",
    "First-turn / next-turn TTFT: medians over conversations. Cached share: cached prompt tokens over prompt tokens "
    "of the next turns, as the responses report them; the engine's cache counter is reconciled with that sum.",
]
WAVE_DEFINITIONS = [
    "A wave sends all its requests at once; the next wave goes when the last one finished. Requests beyond the "
    "candidate's slots (as the engine reports them, else as the candidate sets them) wait in the queue.",
    "TTFT p50 / p90: over every request of the cell; the queue wait is in them.",
]
REPLAY_DEFINITIONS = [
    "A request trace sent at its own arrivals (scaled by replay.time_scale), whatever the engine's pace. In a "
    "Mooncake trace each hash id is one block of prompt tokens (512), the same tokens wherever the id occurs in the "
    "run and other tokens in another run, so a run starts with a cold cache.",
    "Ideal hit rate: the prompt tokens of each request's leading blocks that earlier requests already sent after "
    "the same blocks (what an unbounded prefix cache reuses), over all prompt tokens. Measured: cached prompt "
    "tokens over prompt tokens, as the responses report them; the engine's cache counter is reconciled with that.",
]
AGENTS_DEFINITIONS = [
    "Agent sessions arrive open-loop (Poisson, agents.arrival_rate_per_s); each turn is a streamed chat request with "
    "the tool schemas and the whole history so far, which grows with the engine's own replies. After a think time "
    "the tool's result (or a user's follow-up) is appended and the next turn sent; a sub-agent starts from a copy "
    "of its parent's history and its last reply is the parent's tool result. Sizes and times are drawn from the "
    "plan's seed. With agents.tool_calls: client, servebook plays the agent's tool call after the engine's reply; "
    "with model, the engine is asked for it and a reply without one that parses is counted.",
    "Session p95 turn TTFT: per session (a parent with its sub-agents), the 95th percentile of its turns' TTFTs; the "
    "median over sessions. Turns/s per session: its turns over its duration (first send to last token), think "
    "times included; the median over sessions.",
    "Ideal hit rate: per turn, the prompt and output of the turn its history extends (a session's first turn: the "
    "prefix it shares with earlier sessions' first prompts, as the engine renders them), at most one token short "
    "of its prompt, over all prompt tokens. Measured: cached prompt tokens over prompt tokens, as the responses "
    "report them; the engine's cache counter is reconciled with that.",
    "More than 1% of turns that do not fit the engine's context per request (the session ends there), or of asked "
    "tool calls that do not parse, make the cell invalid.",
]
GAP_NOTE = ("Chunk gaps (ITL) are recorded per streamed chunk: speculative decoding sends several tokens in one "
            "chunk, so a gap is not a per-token figure.")

PRESENT: dict[str, PresentKind] = {
    "decode": PresentKind(
        summary_rank=10,
        table=RunTable("Decode, {category} prompts", (
            *map(shown, ("concurrency", "aggregate_tok_s", "per_request_tok_s", "ttft_s", "itl_p99_s")),
            *DRAFT_COLUMNS, *REALISM_COLUMNS, *REASONING_COLUMNS, CHECK), sort=("concurrency",),
            by_category=True),
        section=Section("Decode", DECODE_DEFINITIONS + [GAP_NOTE],
                        when_present=(DRAFT_DEFINITION, REALISM_DEFINITION, *REASONING_DEFINITIONS)),
        estimates=EstimateTable("Decode, {category} prompts", "concurrency", "Concurrency", (
            *map(estimated, ("aggregate_tok_s", "steady_tok_s", "per_request_tok_s", "ttft_s")),
            # a mean over runs of a few milliseconds: a tenth of one tells candidates apart
            estimated("itl_p99_s", fmt=".1f"),
            *(estimated(name, shown_with="draft_tokens") for name in ("draft_acceptance", "tokens_per_step")),
            estimated("loop_share", "Loop", shown_with="ngram_share"),
            estimated("forced_tail_share", shown_with="ngram_share"),
            *(estimated(name, shown_with=REASONED) for name in ("answer_ttft_s", "reasoning_tok_s", "answer_tok_s"))),
            by_category=True),
        compared=(("Aggregate decode tok/s", "aggregate_tok_s", ".1f", 1.0),
                  ("Per-request decode tok/s (median)", "per_request_tok_s", ".0f", 1.0),
                  ("TTFT ms (median)", "ttft_s", ".0f", 1000.0), ("ITL p99 ms (chunk gaps)", "itl_p99_s", ".1f", 1000.0)),
        charts=(LineChart("concurrency", "aggregate_tok_s", "Aggregate decode rate vs concurrency",
                          "concurrent requests", "tok/s", split_category=True, log2_ticks=True),
                LineChart("concurrency", "per_request_tok_s", "Per-request decode rate vs concurrency",
                          "concurrent requests", "tok/s per request", split_category=True, log2_ticks=True),
                LineChart("concurrency", "ttft_s", "Median TTFT vs concurrency", "concurrent requests", "ms",
                          scale=1000.0, split_category=True, log2_ticks=True),
                LineChart("concurrency", "itl_p99_s", "ITL p99 (chunk gaps) vs concurrency", "concurrent requests",
                          "ms", scale=1000.0, split_category=True, log2_ticks=True)),
        gap_histogram=True, drawn_unmeasured=True),
    "prefill": PresentKind(
        summary_rank=20,
        table=RunTable("Cold prefill", (
            shown("target_prompt_tokens"), shown("prefill_tok_s"), shown("ttft_s", "First token"),
            shown("engine_ttft_s"), shown("engine_prompt_s"), CHECK), sort=("target_prompt_tokens",)),
        section=Section("Cold prefill", PREFILL_DEFINITIONS),
        estimates=EstimateTable("Cold prefill", "target_prompt_tokens", "Prompt tokens", (
            estimated("prefill_tok_s"), estimated("ttft_s", "First token"), estimated("probe_ttft_p95_s"),
            estimated("probe_itl_p99_s"))),
        compared=(("Cold prefill tok/s", "prefill_tok_s", ".0f", 1.0),
                  ("Decodes beside the prefill: ITL p99 ms", "probe_itl_p99_s", ".0f", 1000.0)),
        charts=(LineChart("target_prompt_tokens", "prefill_tok_s", "Cold prefill rate vs prompt size",
                          "prompt tokens", "tok/s"),),
        drawn_unmeasured=True),
    "reuse": PresentKind(
        summary_rank=40,
        table=RunTable("Prompt reuse across turns", (
            *map(shown, ("requests", "first_turn_ttft_s", "next_turn_ttft_s", "cached_share")), CHECK),
            sort=("cell_id",)),
        section=Section("Prompt reuse across turns", REUSE_DEFINITIONS),
        estimates=EstimateTable("Prompt reuse across turns", "requests", "Requests", (
            estimated("first_turn_ttft_s"), estimated("next_turn_ttft_s"))),
        compared=(("Reuse: next-turn TTFT ms", "next_turn_ttft_s", ".0f", 1000.0),
                  ("Reuse: cached share of next turns", "cached_share", ".0%", 1.0)),
        turn_chart=True),
    "wave": PresentKind(
        summary_rank=30,
        table=RunTable("Waves beyond the slot count (queue wait shows in TTFT)", (
            shown("concurrency", "Requests at once"), *map(shown, ("slots", "queued", "aggregate_tok_s")),
            shown("ttft_s", "TTFT p50"), shown("ttft_p90_s"), shown("engine_queue_s"), CHECK), sort=("concurrency",)),
        section=Section("Waves beyond the slot count", WAVE_DEFINITIONS),
        estimates=EstimateTable("Waves beyond the slot count", "concurrency", "Requests at once", (
            estimated("aggregate_tok_s"), estimated("ttft_s", "TTFT p50"), estimated("ttft_p90_s"))),
        compared=(("Waves: TTFT p90 ms (queue wait)", "ttft_p90_s", ".0f", 1000.0),
                  ("Waves: aggregate tok/s", "aggregate_tok_s", ".1f", 1.0)),
        charts=(LineChart("concurrency", "ttft_p90_s", "Queue wait in waves: TTFT p90 vs requests sent at once",
                          "requests sent at once", "ms", scale=1000.0),)),
    "replay": PresentKind(
        summary_rank=45,
        table=RunTable("Trace replay", (
            *map(shown, ("requests", "ideal_hit_rate", "measured_hit_rate")), shown("ttft_s", "TTFT p50"),
            shown("ttft_p90_s"), CHECK), sort=("cell_id",)),
        section=Section("Trace replay", REPLAY_DEFINITIONS),
        compared=(("Replay: measured prefix hit rate", "measured_hit_rate", ".0%", 1.0),
                  ("Replay: TTFT p90 ms", "ttft_p90_s", ".0f", 1000.0))),
    "agents": PresentKind(
        summary_rank=47,
        table=RunTable("Agent sessions", (
            *map(shown, ("sessions", "subagents", "turns", "session_p95_turn_ttft_s", "session_turns_per_s",
                         "ideal_hit_rate", "measured_hit_rate", "overflow_share", "send_lag_p99_ms")), CHECK),
            sort=("cell_id",)),
        section=Section("Agent sessions", AGENTS_DEFINITIONS),
        estimates=EstimateTable("Agent sessions", "sessions", "Sessions", tuple(
            map(estimated, ("session_p95_turn_ttft_s", "session_turns_per_s", "measured_hit_rate")))),
        compared=(("Agents: session p95 turn TTFT ms", "session_p95_turn_ttft_s", ".0f", 1000.0),
                  ("Agents: turns/s per session", "session_turns_per_s", ".2f", 1.0),
                  ("Agents: measured prefix hit rate", "measured_hit_rate", ".0%", 1.0)),
        session_view=True),
    # drawn by load_tables.py (open-loop and capacity tables, one site section) and frontier.py (their charts)
    "load": PresentKind(open_loop=True),
    "capacity": PresentKind(open_loop=True),
}


def register_present(name: str, entry: PresentKind) -> PresentKind:
    """Add what a kind shows (a kind registered in measure/kinds/ under the same name)."""
    if name in PRESENT and PRESENT[name] is not entry:
        raise ValueError(f"cell kind {name!r} has a present entry already")
    PRESENT[name] = entry
    return entry


def unregister_present(name: str) -> None:
    PRESENT.pop(name, None)


def summarised() -> list[tuple[str, PresentKind]]:
    """The kinds in the order their estimates and side-by-side figures are shown."""
    return sorted(PRESENT.items(), key=lambda item: item[1].summary_rank)


@dataclass(frozen=True)
class ComparedFigure:
    """One figure runs are compared by, side by side (a kind's `compared`)."""

    kind: str
    title: str
    metric: str
    format: str
    scale: float


def compared_figures() -> list[ComparedFigure]:
    """Every kind's compared figures, in the order the kinds' estimates are shown."""
    return [ComparedFigure(kind, *figure) for kind, entry in summarised() for figure in entry.compared]


def open_loop_kinds() -> set[str]:
    return {name for name, entry in PRESENT.items() if entry.open_loop}


def gap_histogram_kinds() -> set[str]:
    """The kinds whose cells' chunk gaps make the ITL distribution of a run."""
    return {name for name, entry in PRESENT.items() if entry.gap_histogram}


def turn_chart_kinds() -> set[str]:
    """The kinds whose runs get the per-turn chart, read from the run's requests."""
    return {name for name, entry in PRESENT.items() if entry.turn_chart}


def session_view_kinds() -> set[str]:
    """The kinds whose runs get a session view, read from the run's requests."""
    return {name for name, entry in PRESENT.items() if entry.session_view}


