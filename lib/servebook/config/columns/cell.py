"""The columns every cell carries (measure.cells, measure.validity), and those of the closed-loop kinds: decode,
prefill, prompt reuse and waves."""

from __future__ import annotations

from .entry import CellColumn, count, seconds, share, text

EVERY: tuple[CellColumn, ...] = (
    text("cell_id", "Cell", "the cell's name within its run, unique there.", "cells"),
    text("kind", "Kind", "the cell kind that measured it: a name in the kinds' registry (measure/kinds/).", "cells"),
    text("category", "Category", "the category of the prompts it sent (prose, code, structured, copy, ...).", "cells"),
    count("concurrency", "Concurrency", "requests in flight at once (closed loop), or sessions (agents); 0 where the "
          "cell sends at a rate instead.", "cells"),
    count("target_prompt_tokens", "Prompt tokens", "the prompt length the cell asked for, in tokens (None: the "
          "category's own text).", "cells", unit="tokens"),
    count("output_tokens", "Output tokens", "the completion length each request was forced to, in tokens.", "cells",
          unit="tokens"),
    count("requests", "Requests", "the requests the cell sent (a capacity row: its probes' counted requests).",
          "cells"),
    count("errors", "Errors", "of those, the requests that failed.", "cells"),
    count("prompt_tokens", "Prompt tokens (sum)", "the prompt tokens of its successful requests, summed as the "
          "responses report them (None where one did not).", "cells", unit="tokens"),
    count("cached_tokens", "Cached tokens", "of those, the prompt tokens the engine served from its prefix cache, as "
          "the responses report them.", "cells", unit="tokens"),
    count("completion_tokens", "Generated", "the completion tokens of its successful requests, summed.", "cells",
          unit="tokens"),
    CellColumn("wall_s", "float", "s", "Duration", "first send to last finish of the cell.", ("cells",), ".2f",
               suffix=" s"),
    CellColumn("per_request_tok_s", "float", "tok/s", "Per request tok/s", "median over requests of "
               "(completion_tokens - 1) / (t_last - t_first); prompt reading excluded.", ("cells",),
               phrase="per-request decode"),
    seconds("ttft_s", "TTFT", "median time from send to the first content-bearing chunk.", "cells"),
    seconds("ttft_p90_s", "TTFT p90", "the 90th percentile (nearest rank) of the cell's TTFTs.", "cells"),
    seconds("engine_prompt_s", "Engine's prompt time", "the engine's own prompt time: the median of its per-request "
            "timings (llama.cpp), else the cell's mean from its prefill histogram (vLLM).", "cells"),
    seconds("engine_queue_s", "Engine's queue (mean)", "the engine's own queueing time, the cell's mean from its "
            "histogram (None where the engine reports none).", "cells"),
    seconds("engine_ttft_s", "Engine's first token", "the engine's own time to first token, the cell's mean from its "
            "histogram (vLLM's starts when its front end has the request).", "cells"),
    CellColumn("within_se_pct", "float", "%", "Within-run error", "the standard error of the cell's headline figure "
               "that its own requests explain, in percent (their values' CV over the square root of their number).",
               ("cells",), ".1f", suffix=" %"),
    seconds("ttft_outside_engine_s", "TTFT outside the engine", "the client's TTFT minus the engine's own prompt "
            "time (and queue): client, network, scheduling and the first decode step.", "cells"),
    text("reconciliation", "Reconciliation", "whether the engine's token counters over the cell equal the client's "
         "usage sums: ok, or what disagreed.", "validity"),
    text("reconciliation_message", "Reconciliation detail", "the reconciliation in words: by how much the counters "
         "and the client disagreed.", "validity"),
    text("valid", "Valid", "whether the cell's requests did what was asked (no fault code).", "validity",
         dtype="bool"),
    text("invalid_codes", "Fault codes", "the cell's fault codes, comma-separated (measure.validity.InvalidCode); "
         "decisions read these.", "validity"),
    text("invalid_reasons", "Faults", "the same faults in prose, '; '-separated, for readers.", "validity"),
)

CLOSED_LOOP: tuple[CellColumn, ...] = (
    CellColumn("aggregate_tok_s", "float", "tok/s", "Aggregate tok/s", "sum of completion tokens over the cell / "
               "(first send to last finish).", ("decode", "wave"), phrase="aggregate decode"),
    CellColumn("steady_tok_s", "float", "tok/s", "Steady-state tok/s", "the output rate while all the cell's "
               "requests were in flight, tokens spread evenly over each request's decode span.", ("decode",),
               phrase="steady-state decode"),
    CellColumn("steady_s", "float", "s", "Steady state", "how long all the cell's requests were in flight at once.",
               ("decode",), ".2f", suffix=" s"),
    CellColumn("ramp_up_s", "float", "s", "Ramp up", "from the first send until all the cell's requests were in "
               "flight.", ("decode",), ".2f", suffix=" s"),
    CellColumn("ramp_down_s", "float", "s", "Ramp down", "from the steady state's end (the last time one of all the "
               "requests in flight finished) to the cell's last finish.", ("decode",), ".2f", suffix=" s"),
    CellColumn("prefill_tok_s", "float", "tok/s", "Prefill tok/s", "the median over requests of prompt_tokens / "
               "TTFT with max_tokens=1 and nothing cached.", ("prefill",), ".0f", phrase="cold prefill"),
    seconds("first_turn_ttft_s", "First-turn TTFT", "the median over conversations of their first (cold) turn's "
            "TTFT.", "reuse", phrase="first-turn TTFT"),
    seconds("next_turn_ttft_s", "Next-turn TTFT", "the median TTFT of the conversations' later turns, whose earlier "
            "turns the engine may have cached.", "reuse", phrase="next-turn TTFT"),
    CellColumn("next_turn_within_se_pct", "float", "%", "Next-turn error", "the next-turn TTFT's standard error from "
               "the cell's conversations, in percent (their means' spread).", ("reuse",), ".1f", suffix=" %"),
    share("cached_share", "Cached share (next turns)", "cached prompt tokens over prompt tokens of the next turns, "
          "as the responses report them.", "reuse"),
    count("slots", "Slots", "the candidate's parallel slots, as the engine reports them, else as the candidate sets "
          "them.", "wave"),
    count("queued", "Queued", "the requests of a wave beyond the slots, which wait in the engine's queue.", "wave"),
)
