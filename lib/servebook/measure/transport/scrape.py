"""Reading an engine's /metrics into a snapshot, before and after every cell."""

from __future__ import annotations

import time

import httpx

from ...engines.counters import Scrape, parse_metrics


async def scrape(client: httpx.AsyncClient, base_url: str) -> Scrape:
    t = time.monotonic()
    try:
        response = await client.get(f"{base_url}/metrics", timeout=10.0)
    except httpx.HTTPError as error:
        return Scrape(t=t, available=False, error=f"{type(error).__name__}: {error}")
    if response.status_code != 200:
        return Scrape(t=t, available=False, error=f"/metrics answered {response.status_code}")
    return parse_metrics(response.text, t)
