"""Measuring a ready engine: the streaming client, prompts, /metrics scrapes, reconciliation, cells, gates."""
