"""The columns the observers of a cell write beside its figures: the drafter's evidence and the output's realism
(measure.cells, measure.figures.realism), the host and GPU beside the cell (measure.observers.host,
measure.observers.gpu), several replicas (measure.observers.replicas) and the engine's gauges
(measure.observers.gauges)."""

from __future__ import annotations

from .entry import CellColumn, count, percent, text

DRAFTER: tuple[CellColumn, ...] = (
    count("draft_tokens", "Drafted tokens", "the tokens the engine's drafter proposed in the cell (its per-request "
          "counts, else its counters' change); None: no drafter, or not reported.", "drafter", dtype="float",
          unit="tokens"),
    count("draft_accepted_tokens", "Accepted tokens", "of those, the tokens the target model accepted.", "drafter",
          dtype="float", unit="tokens"),
    percent("draft_acceptance", "Accepted", "accepted over drafted tokens.", "drafter", phrase="drafter acceptance"),
    text("draft_source", "Acceptance", "'engine' where the acceptance was earned on the output, 'synthetic' where a "
         "benchmarking setting fixed it.", "drafter"),
    CellColumn("tokens_per_step", "float", "tokens", "Tokens/step", "completion tokens over (completion - accepted): "
               "the tokens each forward pass of the target emitted, 1 without a drafter.", ("drafter",), ".2f"),
)

REALISM: tuple[CellColumn, ...] = (
    percent("ngram_share", "N-gram share", "of the generated tokens, those an n-gram lookup over the prompt and the "
            "output so far predicts.", "realism"),
    percent("loop_share", "Loop share", "of the generated tokens, those the same lookup over the output alone "
            "predicts: the output repeating itself.", "realism"),
    percent("forced_tail_share", "Forced tail", "the share of the forced length written past where the model, asked "
            "again greedily with nothing forcing its length, stopped on its own.", "realism"),
    count("realism_requests", "Analysed requests", "the cell's requests the shares were read from.", "realism"),
    text("output_sample", "Output sample", "the opening of the first analysed output, on one line.", "realism"),
)

HOST: tuple[CellColumn, ...] = (
    CellColumn("foreign_cpu_cores", "float", "cores", "Others' CPU", "CPU cores processes other than the run's kept "
               "busy during the cell (None: not checked).", ("host",), ".2f"),
    CellColumn("foreign_cpu_limit", "float", "cores", "Others' CPU limit", "the limit foreign_cpu_cores was held to, "
               "relative to the cores the run left idle.", ("host",), ".2f"),
    CellColumn("own_cpu_cores", "float", "cores", "Own CPU", "CPU cores the run's own processes (client, engine, a "
               "round's other seats) kept busy during the cell.", ("host",), ".2f"),
    CellColumn("cpu_probe_ms", "float", "ms", "CPU probe", "the time of a fixed piece of pure-Python work on the "
               "client's CPU after the cell: longer where the CPU runs slower.", ("host",), ".2f", suffix=" ms"),
    CellColumn("engine_cpu_probe_ms", "float", "ms", "Engine CPU probe", "the same probe on the CPUs the engine is "
               "held to (None: it is not held).", ("host",), ".2f", suffix=" ms"),
    CellColumn("cpu_steal_cores", "float", "cores", "CPU steal", "CPU cores the hypervisor took from the machine "
               "during the cell.", ("host",), ".2f"),
    CellColumn("seated_cpu_cores", "float", "cores", "Seats' CPU", "CPU cores a resident round's other seats kept "
               "busy during the cell (None: no other seats).", ("host",), ".2f"),
    CellColumn("contending_cpu_cores", "float", "cores", "Contending CPU", "of those, the cores they kept busy on the "
               "CPUs this engine is held to while it measured (0: it is not held).", ("host",), ".2f"),
    text("engine_cpus", "Engine CPUs", "the CPUs the engine's busiest threads ran on during the cell.", "host"),
)

GPU: tuple[CellColumn, ...] = (
    CellColumn("gpu_energy_j", "float", "J", "GPU energy", "the energy the engine's GPUs drew during the cell, "
               "integrated from their power samples.", ("gpu",), ".0f", suffix=" J"),
    CellColumn("gpu_power_w", "float", "W", "GPU power", "that energy over the sampled span.", ("gpu",), ".0f",
               suffix=" W"),
    CellColumn("gpu_sm_clock_mhz", "float", "MHz", "SM clock", "the mean SM clock of the engine's GPUs over the "
               "cell's samples.", ("gpu",), ".0f", suffix=" MHz"),
    CellColumn("joules_per_token", "float", "J/token", "Energy per token", "the GPU energy over the cell's "
               "completion tokens.", ("gpu",), ".3f", phrase="energy per token"),
    CellColumn("tok_s_per_w", "float", "tok/s/W", "tok/s per W", "the cell's completion tokens per second over the "
               "GPU power.", ("gpu",), ".2f"),
    text("gpu_throttle", "GPU throttled", "the throttle reasons the engine's GPUs reported during the cell, "
         "comma-separated.", "gpu"),
    text("gpu_foreign_pids", "Foreign GPU processes", "processes other than the run's found on the engine's GPUs, "
         "comma-separated.", "gpu"),
)

REPLICAS: tuple[CellColumn, ...] = (
    count("replicas_serving", "Replicas serving", "the replicas whose counters still answered at the cell's end.",
          "replicas"),
    text("replica_requests", "Requests per replica", "each replica's requests, where servebook chose the replica "
         "(JSON, one entry per replica).", "replicas"),
    text("replica_lost_requests", "Lost per replica", "each replica's failed requests, where attributable (JSON).",
         "replicas"),
    text("replica_generation_tokens", "Generated per replica", "each replica's generated tokens by its own counters "
         "(JSON).", "replicas"),
    text("replica_prompt_tokens", "Prompt tokens per replica", "each replica's prompt tokens by its own counters "
         "(JSON).", "replicas"),
    text("replica_cached_tokens", "Cached per replica", "each replica's cached prompt tokens by its own counters "
         "(JSON).", "replicas"),
    text("replica_hit_rates", "Hit rate per replica", "each replica's cached over prompt tokens by its counters "
         "(JSON).", "replicas"),
    percent("cache_kept", "Prefix cache kept", "the replicas' cached tokens over what a perfect prefix cache would "
            "have served the cell's requests.", "replicas"),
    text("replica_reconciliation", "Replica reconciliation", "each replica's reconciliation with the client's "
         "requests it served, comma-separated.", "replicas"),
    CellColumn("replica_balance", "float", "", "Balance", "the least-loaded replica's share of generated tokens "
               "against an even split (1: even, 0: one did nothing).", ("replicas",), ".2f"),
)

GAUGES: tuple[CellColumn, ...] = (
    percent("kv_usage_peak", "Peak KV cache use", "the highest KV cache usage the engine's gauge showed during the "
            "cell.", "gauges", phrase="peak KV cache use"),
    CellColumn("running_peak", "float", "requests", "Peak running", "the most requests the engine reported running "
               "at once.", ("gauges",), ".0f"),
    CellColumn("waiting_peak", "float", "requests", "Peak waiting", "the most requests the engine reported waiting "
               "at once.", ("gauges",), ".0f"),
    CellColumn("preemptions", "float", "", "Preemptions", "the engine's preemptions between the scrapes on either "
               "side of the cell.", ("gauges",), ".0f"),
    count("gauge_samples", "Gauge samples", "the gauge samples taken during the cell (plan.gauge_interval_ms).",
          "gauges"),
)
