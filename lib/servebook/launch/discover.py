"""A running server described as a candidate: `servebook run --url` measures a server without a YAML file.

The engine is told from what the server says of itself, in the order that is surest: the `owned_by` of its
/v1/models (vLLM, SGLang and llama.cpp each write their own name there), then the prefix of its Prometheus
metrics (`vllm:`, `sglang:`, `llamacpp:`), then llama.cpp's /props, and an OpenAI-compatible endpoint when
none of them answers. The candidate's knobs are what the engine reports it runs with, so the attach check
verifies each against the same report and the run is filed under the configuration the server really has: a
server restarted with another chunk size becomes another candidate, not more runs of the same one. What the
server does not report stays unclaimed (the engine's default), and the run records it as not verified.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config.candidate import DRAFTERS_WITH_MODEL, Candidate
from ..config.errors import InputError
from ..config.loading import validate
from ..engines import get_engine, known_engines
from ..engines.http_client import EngineClient
from .target import api_key_of
from .verify import REPORTED_KNOBS, check_reachable, read_self_report, select_model

if TYPE_CHECKING:
    import httpx

#: the engines a server can be told apart as; anything else that speaks the API is `openai`
DETECTABLE = ("vllm", "sglang", "llamacpp")
#: /v1/models' owned_by -> engine (llama.cpp's server writes "llamacpp", vLLM "vllm", SGLang "sglang")
OWNED_BY = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llamacpp", "llama.cpp": "llamacpp"}
#: SGLang's speculative_algorithm and vLLM's speculative_config.method -> servebook's drafter kind
DRAFTER_NAMES = {"ngram": "ngram", "eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp", "nextn": "mtp",
                 "deepseek_mtp": "mtp", "draft_model": "draft_model", "standalone": "draft_model", "dflash": "dflash"}


@dataclass(frozen=True)
class Discovered:
    """The candidate a server is measured as, and how its engine was told (shown before the run starts)."""

    candidate: Candidate
    evidence: str


def detect_engine(client: EngineClient) -> tuple[str, str]:
    """The engine behind `client`'s server and what told it; `openai` when nothing the server says names one."""
    bodies = client.bodies(("/v1/models", "/metrics", "/props"))
    listed = bodies.get("/v1/models")
    owners = {str(m.get("owned_by", "")).lower() for m in _models(listed)}
    named = sorted({OWNED_BY[o] for o in owners if o in OWNED_BY})
    if len(named) == 1:
        return named[0], f"/v1/models says owned_by {named[0]}"
    metrics = bodies.get("/metrics")
    if isinstance(metrics, str):
        prefixes = {name for name in DETECTABLE if re.search(rf"^{name}:", metrics, re.MULTILINE)}
        if len(prefixes) == 1:
            engine = prefixes.pop()
            return engine, f"its /metrics are {engine}:*"
    props = bodies.get("/props")
    if isinstance(props, dict) and "total_slots" in props:
        return "llamacpp", "it answers llama.cpp's /props"
    return "openai", "it names no engine servebook knows (measured as an OpenAI-compatible server)"


def _models(listed: Any) -> list[dict]:
    data = listed.get("data") if isinstance(listed, dict) else None
    return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def server_candidate(url: str, *, engine: str | None = None, served_name: str | None = None,
                     api_key_env: str | None = None, name: str | None = None,
                     transport: "httpx.BaseTransport | None" = None) -> Discovered:
    """The candidate that describes the server at `url` as it reports itself; InputError when it cannot be
    reached, does not serve `served_name`, or runs a drafter servebook cannot name."""
    url = url.rstrip("/")
    launch = {"mode": "attach", "url": url, **({"api_key_env": api_key_env} if api_key_env else {})}
    # the URL and the key's variable are checked as a candidate checks them, before anything is asked
    probe = validate(Candidate, {"engine": "openai", "model": {"id": "probe"}, "launch": launch}, "--url")
    headers = {"Authorization": f"Bearer {key}"} if (key := api_key_of(probe)) else {}
    if transport is None:
        check_reachable(url)
    client = EngineClient(url, headers, transport=transport)
    if engine is not None:
        if engine not in known_engines():
            raise InputError(f"--engine {engine!r}: not one of {', '.join(known_engines())}")
        evidence = "--engine"
    else:
        engine, evidence = detect_engine(client)
    adapter = get_engine(engine)
    report = read_self_report(adapter, url, headers, transport=transport)
    model = select_model(report, served_name, url)
    if model is None:
        raise InputError(f"--model: {url} lists no models at /v1/models; name the one to measure")
    settings = report.settings
    knobs = _reported_knobs(engine, settings, url)
    data = {"name": name or _name(engine, model), "engine": engine,
            "model": {"id": str(settings.get("model_file") or model), "served_name": model},
            "knobs": knobs, "launch": launch}
    return Discovered(validate(Candidate, data, f"the server at {url}"), evidence)


def _reported_knobs(engine: str, settings: dict[str, Any], url: str) -> dict[str, Any]:
    """The knobs the engine's report gives, in its own knob model's fields (llama.cpp has no prefix_caching)."""
    fields = get_engine(engine).knobs_model.model_fields
    knobs = {k: settings[k] for k in REPORTED_KNOBS if k in fields and settings.get(k) is not None}
    # vLLM and SGLang report the context as a total; llama.cpp only per slot, which is the total split over the
    # slots or all of it (a unified KV cache): left unclaimed rather than guessed
    if isinstance(settings.get("context_length"), int) and "context_length" in fields:
        knobs["context_length"] = settings["context_length"]
    if settings.get("drafter_active"):
        knobs["drafter"] = _drafter(settings, url)
    return knobs


def _drafter(settings: dict[str, Any], url: str) -> dict[str, Any]:
    method = str(settings.get("drafter_method") or "").lower()
    kind = DRAFTER_NAMES.get(method)
    if kind is None or kind in DRAFTERS_WITH_MODEL:
        # a drafter with a model of its own needs that model named, which no engine's report gives servebook
        said = f" ({method})" if method else ""
        raise InputError(f"{url} runs a drafter{said} that servebook cannot name from what the server reports; "
                         "write a candidate that names it (knobs.drafter; data/candidates/attach-vllm.yaml shows "
                         "the shape) and run `servebook run CANDIDATE`")
    return {"kind": kind}


def _name(engine: str, model: str) -> str:
    """A label from the engine and the served model's last path part: `vllm-Llama-3.1-8B`."""
    tail = re.sub(r"[^A-Za-z0-9._-]+", "-", model.rstrip("/").rsplit("/", 1)[-1]).strip("-")
    return f"{engine}-{tail or 'model'}"
