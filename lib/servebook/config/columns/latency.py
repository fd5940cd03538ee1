"""The latency columns: the peers' percentiles and throughputs (measure.figures.latency, docs/metrics.md), a decode cell's
chunk gaps (measure.figures.itl), the probes beside a prefill (measure.kinds.prefill.probes), and a reasoning model's phases
(measure.figures.reasoning)."""

from __future__ import annotations

from .entry import CellColumn, count, millis, seconds, text

#: what each latency is, per request, from the client's clock
_LATENCIES = (("ttft", "TTFT", "send to the first content-bearing chunk"),
              ("tpot", "TPOT", "(t_last - t_first) / (completion_tokens - 1), for requests of two tokens or more"),
              ("itl", "ITL", "each gap between two consecutive content chunks of a request, all requests' pooled"),
              ("e2e", "E2E", "send to the last chunk"))
_STATS = (("mean", "mean", "the mean"), ("p50", "p50", "the median (linear interpolation, as vLLM's)"),
          ("p90", "p90", "the 90th percentile (linear interpolation)"),
          ("p99", "p99", "the 99th percentile (linear interpolation)"))

PEERS: tuple[CellColumn, ...] = (
    *(millis(f"{name}_{stat}_ms", f"{title} {words}", f"{said} of {what}.", "latency")
      for name, title, what in _LATENCIES for stat, words, said in _STATS),
    CellColumn("request_rps", "float", "requests/s", "Request throughput", "successful requests over the cell's "
               "duration (an open-loop cell's measured window).", ("latency",), ".2f"),
    CellColumn("output_tok_s", "float", "tok/s", "Output throughput", "their completion tokens over the duration.",
               ("latency",)),
    CellColumn("total_tok_s", "float", "tok/s", "Total-token throughput", "their prompt and completion tokens over "
               "the duration.", ("latency",)),
    *(count(f"{name}_n", f"{title} samples", f"the values the {title} figures are read from: "
            + ("chunk gaps." if name == "itl" else "requests."), "latency")
      for name, title, _ in _LATENCIES),
)

ITL: tuple[CellColumn, ...] = (
    *(seconds(f"itl_{stat}_s", f"ITL {stat}", f"the {words} of a decode cell's chunk gaps, pooled over its requests "
              "(linear interpolation).", "itl")
      for stat, words in (("p50", "median"), ("p95", "95th percentile"), ("p99", "99th percentile"),
                          ("max", "largest"))),
    CellColumn("itl_tokens_per_chunk", "float", "tokens", "Tokens per chunk", "the mean tokens a chunk carried "
               "(more than 1 where speculative decoding or batching sends several at once).", ("itl",), ".2f"),
    seconds("itl_token_p50_s", "ITL per token p50", "the median of each chunk gap over the tokens of the chunk that "
            "ended it, where known.", "itl"),
    seconds("itl_token_p99_s", "ITL per token p99", "the 99th percentile of each chunk gap over the tokens of the "
            "chunk that ended it, where known.", "itl"),
)

PROBES: tuple[CellColumn, ...] = (
    count("probe_requests", "Probes", "the short interference probes sent beside the cell's prefill requests "
          "(plan.prefill.probes).", "probes"),
    seconds("probe_ttft_p50_s", "Probe TTFT p50", "the median TTFT of the short requests sent beside the prefill.",
            "probes"),
    seconds("probe_ttft_p95_s", "Probe TTFT p95", "the 95th percentile of the TTFTs of short requests sent beside "
            "the prefill.", "probes", phrase="TTFT p95 of short requests beside the prefill"),
    *(seconds(f"probe_itl_{stat}_s", f"Probe ITL {stat}", f"the {words} of the chunk gaps of decodes running beside "
              "the prefill.", "probes", phrase="ITL p99 of decodes beside the prefill" if stat == "p99" else "")
      for stat, words in (("p50", "median"), ("p95", "95th percentile"), ("p99", "99th percentile"),
                          ("max", "largest"))),
    count("probe_ttft_n", "Probe TTFT samples", "the probes' TTFTs the probe TTFT percentiles are read from.",
          "probes"),
    count("probe_itl_n", "Probe ITL samples", "the probes' chunk gaps the probe ITL percentiles are read from.",
          "probes"),
)

REASONING: tuple[CellColumn, ...] = (
    seconds("reasoning_ttft_s", "Reasoning TTFT", "the median time from send to the first reasoning chunk.",
            "reasoning"),
    seconds("answer_ttft_s", "Answer TTFT", "the median time from send to the first answer chunk, thinking included "
            "(the TTFT where nothing reasons).", "reasoning", phrase="time to the first answer token"),
    count("reasoning_tokens", "Reasoning tokens", "the thinking tokens of the cell's requests, summed (the engine's "
          "own count where it reports one).", "reasoning", unit="tokens"),
    count("answer_tokens", "Answer tokens", "the rest of their completion tokens, summed.", "reasoning",
          unit="tokens"),
    CellColumn("reasoning_tok_s", "float", "tok/s", "Reasoning tok/s", "the median over requests of (reasoning "
               "tokens - 1) / (last - first reasoning chunk).", ("reasoning",), phrase="reasoning decode"),
    CellColumn("answer_tok_s", "float", "tok/s", "Answer tok/s", "the median over requests of (answer tokens - 1) / "
               "(last - first answer chunk).", ("reasoning",), phrase="answer decode"),
    text("reasoning_split", "Reasoning split", "'split' where every stream's reasoning and answer were told apart, "
         "'total_only' where the cell was reconciled on their total; None where no stream reasoned.", "reasoning"),
)
