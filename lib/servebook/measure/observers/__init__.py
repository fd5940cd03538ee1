"""What is watched beside a cell while it runs, and kept as its covariates and validity evidence: the host's CPUs
and the seats' contention for them, the GPUs, the engine's load gauges, the replicas' counters, the client's
token counts reconciled with the engine's, and a drafter that drafts nothing."""
