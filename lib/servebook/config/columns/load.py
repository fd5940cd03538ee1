"""The columns of the open-loop kinds: load at a rate (measure.openloop) with the plan's objectives, trace replay
(measure.kinds.replay.blocks), agent sessions (measure.kinds.agents.session_figures) and the capacity row
(measure.kinds.capacity.search)."""

from __future__ import annotations

from .entry import CellColumn, count, millis, seconds, share, text

OPEN_LOOP: tuple[CellColumn, ...] = (
    CellColumn("offered_rps", "float", "requests/s", "Offered rate", "the rate the cell's arrivals were scheduled "
               "at.", ("load",), ".2f"),
    CellColumn("achieved_rps", "float", "requests/s", "Achieved rate", "successful requests of the measured window "
               "over its length.", ("load",), ".2f"),
    seconds("ttft_p50_s", "TTFT p50", "the median (nearest rank) of the measured window's TTFTs.", "load"),
    seconds("tpot_p50_s", "TPOT p50", "the median (nearest rank) of the measured window's TPOTs.", "load"),
    seconds("tpot_p90_s", "TPOT p90", "the 90th percentile (nearest rank) of the measured window's TPOTs.", "load"),
    seconds("e2e_p90_s", "E2E p90", "the 90th percentile (nearest rank) of the measured window's send-to-last-chunk "
            "times.", "load"),
    millis("send_lag_p99_ms", "Send lag p99", "the 99th percentile of how late requests left after they were due.",
           "load", "agents"),
    count("arrival_seed", "Arrival seed", "the seed the cell's arrivals were drawn from (the plan's, moved by the "
          "run's round).", "load"),
)

OBJECTIVES: tuple[CellColumn, ...] = (
    share("slo_attainment", "SLO attainment", "the share of the counted requests that met every objective of the "
          "plan's slo.", "objectives", phrase="SLO attainment"),
    share("slo_attainment_low", "SLO attainment low", "the lower bound of the attainment's interval, the requests' "
          "autocorrelation counted.", "objectives"),
    share("slo_attainment_high", "SLO attainment high", "the upper bound of the attainment's interval.",
          "objectives"),
    CellColumn("slo_effective_requests", "float", "requests", "Effective requests", "what the counted requests are "
               "worth as independent ones, their outcomes' autocorrelation counted.", ("objectives",), ".0f"),
    CellColumn("goodput_rps", "float", "requests/s", "Goodput", "requests that met every objective, per second of "
               "the cell (an open-loop cell's measured window).", ("objectives",), ".2f", phrase="goodput"),
    text("slo_met", "SLO met", "whether the attainment reached the plan's target.", "objectives", dtype="bool"),
    count("slo_dropped_requests", "Dropped requests", "a capacity probe disturbed by stalled reads alone: the "
          "requests dropped from it, its objectives' figures the rest's.", "objectives"),
)

REPLAY: tuple[CellColumn, ...] = (
    share("ideal_hit_rate", "Ideal hit rate", "the prompt tokens an unbounded prefix cache would serve from earlier "
          "requests, over all prompt tokens.", "replay", "agents"),
    share("measured_hit_rate", "Measured hit rate", "cached prompt tokens over prompt tokens, as the responses report "
          "them.", "replay", "agents", phrase="replay prefix hit rate"),
    CellColumn("trace_span_s", "float", "s", "Trace span", "the replayed trace's last arrival, scaled.", ("replay",),
               ".1f", suffix=" s"),
    CellColumn("trace_rps", "float", "requests/s", "Trace rate", "the replayed trace's requests per second of its "
               "span.", ("replay",), ".2f"),
    seconds("replay_ttft_p90_s", "Replay TTFT p90", "the 90th percentile of the replayed requests' TTFTs.", "replay",
            phrase="replay TTFT p90"),
    count("replay_ttft_n", "Replay TTFT samples", "the replayed requests' TTFTs the p90 is read from.", "replay"),
)

AGENTS: tuple[CellColumn, ...] = (
    count("sessions", "Sessions", "the agent sessions the cell ran (a parent with its sub-agents is one).", "agents"),
    count("subagents", "Sub-agents", "the sub-agents those sessions started.", "agents"),
    count("turns", "Turns", "the turns (requests) of every session.", "agents"),
    seconds("session_p95_turn_ttft_s", "Session p95 turn TTFT", "per session the 95th percentile of its turns' "
            "TTFTs, the median over sessions.", "agents", phrase="session p95 turn TTFT"),
    CellColumn("session_turns_per_s", "float", "turns/s", "Turns/s per session", "per session its turns over its "
               "duration (think times included), the median over sessions.", ("agents",), ".2f",
               phrase="turns per second of a session"),
    CellColumn("session_duration_s", "float", "s", "Session duration", "the median over sessions of first send to "
               "last token.", ("agents",), ".1f", suffix=" s"),
    CellColumn("session_tokens", "float", "tokens", "Session tokens", "the median over sessions of their prompt and "
               "completion tokens.", ("agents",), ".0f"),
    seconds("turn_ttft_p95_s", "Turn TTFT p95", "the 95th percentile of every turn's TTFT, sessions pooled.",
            "agents"),
    count("context_tokens_max", "Longest context", "the longest prompt a turn sent, in tokens.", "agents",
          unit="tokens"),
    share("overflow_share", "Overflowed", "the share of turns that did not fit the engine's context per request.",
          "agents", fmt=".1%"),
    share("parse_failure_share", "Unparsed tool calls", "of the tool calls the engine was asked for, the share whose "
          "reply did not parse.", "agents", fmt=".1%"),
    millis("send_lag_p50_ms", "Send lag p50", "the median of how late turns left after they were due.", "agents"),
)

CAPACITY: tuple[CellColumn, ...] = (
    CellColumn("capacity_rps", "float", "requests/s", "Capacity", "the highest request rate at which the plan's "
               "objectives hold for their attainment target (isotonic fit over every probe).", ("capacity",), ".3g",
               phrase="capacity under the objectives"),
    CellColumn("capacity_low_rps", "float", "requests/s", "Capacity low", "the lower bound of the capacity's "
               "interval, from the probes' exact binomial bounds.", ("capacity",), ".3g"),
    CellColumn("capacity_high_rps", "float", "requests/s", "Capacity high", "the upper bound of the capacity's "
               "interval.", ("capacity",), ".3g"),
    text("capacity_cliff", "Cliff", "whether most requests miss just above the capacity.", "capacity", dtype="bool"),
    count("capacity_probes", "Probes", "the probes the capacity search measured.", "capacity"),
    text("capacity_client_limited", "Client limited", "whether the client could not offer more, so the capacity is "
         "a lower bound.", "capacity", dtype="bool"),
)
