"""The engine as the measurement sees it, fixed once it answers: where, with which key, which model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..roles import MeasuredEngine
from .routing import Route


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    adapter: MeasuredEngine
    #: the model name requests carry (None: the first one /v1/models lists)
    model: str | None = None
    api_key: str = "servebook"
    #: how many requests the engine runs at once, when known (waves report how many queued)
    slots: int | None = None
    #: the most tokens one request may hold (prompt and output), when known (agent turns that do not fit overflow)
    context_tokens: int | None = None
    #: the engine's process, when servebook launched it here (host telemetry is only checked then)
    engine_pid: int | None = None
    #: the engine's log, where compile lines are looked for
    engine_log: Path | None = None
    #: the candidate's own request fields, sent on top of the engine's way of forcing the length
    request_extras: Mapping[str, Any] = field(default_factory=dict)
    #: what a chat request carries for the candidate's knobs where the engine reads them per request (reasoning on
    #: vLLM and SGLang: chat_template_kwargs.enable_thinking, reasoning_effort); request_extras win over them
    chat_request_extras: Mapping[str, Any] = field(default_factory=dict)
    #: several replicas (launch.replicas): every one's URL, each scraped; the first is `base_url`
    replica_urls: tuple[str, ...] = ()
    #: the router in front of them, which the measured requests go through (None: servebook spreads them)
    router_url: str | None = None
    #: the header the router reads a conversation's session key from (launch.router.session_header; None: none sent)
    session_header: str | None = None
    #: whether the candidate runs a drafter (knobs.drafter): an engine's count of 0 drafted tokens is then a drafter
    #: that proposed nothing, not a run without one (llama.cpp reports draft_n 0 either way); "engine" where its
    #: acceptance is earned, "synthetic" where a benchmarking setting fixes it (Drafter.acceptance_source)
    draft_source: str | None = None
    #: what the engine reported of its own settings, in knob terms (EngineAdapter.reported_settings)
    settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def drafting(self) -> bool:
        return self.draft_source is not None

    @property
    def absent_cached_is_zero(self) -> bool:
        """Whether a usage without cached tokens means none were cached: so for an engine that omits a zero
        (SGLang) when its cache report is on, as servebook starts it; a server started without it (one attached)
        omits them always, so there they are unknown."""
        return self.adapter.usage_omits_zero_cached and self.settings.get("cache_report") is not False

    def __post_init__(self) -> None:
        object.__setattr__(self, "base_url", self.base_url.rstrip("/"))

    @property
    def route(self) -> Route | None:
        """Where the measured requests go instead of `base_url`: the router, or every replica in turn."""
        return Route.of(self.replica_urls, self.router_url, self.session_header)

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def extras(self, output_tokens: int) -> dict[str, Any]:
        return {**self.adapter.request_extras(output_tokens), **self.request_extras}

    def for_chat(self, extra_body: Mapping[str, Any] | None) -> dict[str, Any]:
        """A chat request's body fields: `extra_body` over the knobs' chat fields, the template's kwargs merged (a
        completion of a token prompt carries none: no template or reasoning parser applies to it)."""
        body = dict(extra_body or {})
        merged = {**self.chat_request_extras, **body}
        kwargs = {**(self.chat_request_extras.get("chat_template_kwargs") or {}),
                  **(body.get("chat_template_kwargs") or {})}
        if kwargs:
            merged["chat_template_kwargs"] = kwargs
        return merged
