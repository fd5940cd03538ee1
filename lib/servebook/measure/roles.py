"""What measuring an engine needs of its adapter: the measure layer's own protocol.

The engine adapters (servebook.engines) satisfy it; the measurement names only these members: how to ask for a
forced length and usage, the engine's tokenizer and chat template, its counters and histograms, its log's compile
and error lines, and its own per-request timings.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import httpx

    from ..engines._base import ServerCounts, ServerTimings
    from ..engines.counters import Gauge, Scrape


class MeasuredEngine(Protocol):
    """An engine as the measurement sees it, once it answers."""

    @property
    def kind(self) -> str: ...
    @property
    def reconciles(self) -> bool: ...
    @property
    def compile_pattern(self) -> re.Pattern | None: ...
    @property
    def queue_histogram(self) -> str | None: ...
    @property
    def prefill_histogram(self) -> str | None: ...
    @property
    def ttft_histogram(self) -> str | None: ...
    @property
    def gauges(self) -> "tuple[Gauge, ...]": ...
    @property
    def usage_omits_zero_cached(self) -> bool: ...

    def request_extras(self, output_tokens: int) -> dict: ...

    def stream_options(self) -> dict: ...

    def server_counts(self, before: "Scrape", after: "Scrape") -> "ServerCounts | None": ...

    def server_timings(self, extra: dict[str, Any] | None) -> "ServerTimings | None": ...

    def error_lines(self, log_text: str) -> list[str]: ...

    async def tokenize(self, http: "httpx.AsyncClient", base_url: str, text: str, model: str,
                       headers: dict[str, str]) -> list[int] | None: ...

    async def render_chat(self, http: "httpx.AsyncClient", base_url: str, body: dict[str, Any],
                          headers: dict[str, str]) -> list[int] | None: ...
