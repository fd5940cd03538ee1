"""What a cell's requests are summarised into: per-request statistics, the peers' latency percentiles (of records,
and of a run's stored tables), inter-token latency, whether a tail has samples enough, a reasoning model's split,
and the realism of the output."""
