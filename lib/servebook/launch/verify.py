"""What a server says about itself, checked against what the candidate claims.

Attach mode measures a server servebook did not start, so the candidate's model and knobs are
claims. They are checked against the engine's own report (llama.cpp /props and /slots, SGLang's
server info, vLLM's /v1/models): a contradiction refuses the run before anything is recorded,
and a claim the engine cannot report is recorded as not verified, never as checked (a `Claim` per claim).
The same report picks the model to measure on endpoints that serve several.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..config.candidate import Candidate
from ..config.claims import Claim, Verification
from ..config.errors import InputError
from ..engines import get_engine
from ..engines.flags import on_command_line
from ..engines.http_client import EngineClient
from ..models.random_models import model_file_name
from ..util.aio import run_blocking
from .roles import LaunchedEngine

if TYPE_CHECKING:
    import httpx

NOT_VERIFIED = Claim(status="not_verified")


def check_reachable(url: str, timeout_s: float = 3.0) -> None:
    """Fail at once, with one message, on a malformed URL or a port where nothing listens."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"launch.url {url!r}: not an http(s) URL; write it whole, e.g. http://127.0.0.1:8080")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise InputError(f"launch.url {url!r}: the port is not a number between 1 and 65535") from None
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout_s).close()
    except OSError as error:
        raise InputError(f"launch.url {url}: nothing answers at {parts.hostname}:{port} "
                         f"({error.strerror or error}); start the server, or fix the URL") from None


@dataclass
class SelfReport:
    """The models an endpoint lists and the settings its engine reports, in knob terms."""

    models: list[str] | None  # None: /v1/models did not answer
    settings: dict[str, Any] = field(default_factory=dict)
    #: what each path answered (JSON, or the text of /metrics), kept with the run so a claim can be re-read later
    bodies: dict[str, Any] = field(default_factory=dict)

    @property
    def record(self) -> dict:
        return {"models": self.models, "settings": self.settings}


def read_self_report(adapter: LaunchedEngine, base_url: str, headers: dict, timeout_s: float = 5.0, *,
                     transport: "httpx.BaseTransport | None" = None) -> SelfReport:
    client = EngineClient(base_url, headers, timeout_s=timeout_s, transport=transport)
    bodies = client.bodies(("/v1/models", *adapter.self_report_paths))
    listed = bodies.get("/v1/models")
    models = None
    if isinstance(listed, dict) and isinstance(listed.get("data"), list):
        models = [str(m["id"]) for m in listed["data"] if isinstance(m, dict) and "id" in m]
    return SelfReport(models, adapter.reported_settings(bodies), bodies)


def read_server_info(adapter: LaunchedEngine, base_url: str, headers: dict, *,
                     transport: "httpx.BaseTransport | None" = None) -> dict[str, Any] | None:
    """What the engine says about itself (version, server args), from the first info path that answers."""
    client = EngineClient(base_url, headers, transport=transport)
    for path in adapter.info_paths:
        response = client.get(path)
        if response is not None and response.status_code == 200:
            try:
                body = response.json()
            except ValueError:
                continue
            return {"path": path, **body} if isinstance(body, dict) else {"path": path, "body": body}
    return None


def select_model(report: SelfReport, served_name: str | None, where: str) -> str | None:
    """The model name to send requests to: `model.served_name` when the endpoint lists it, the only model when
    there is one; refused when the name is not offered or when several are offered and none was named."""
    models = report.models
    if not models:
        return served_name  # an endpoint without /v1/models takes the name it is given (or its default)
    if served_name is not None:
        if served_name not in models:
            raise InputError(f"model.served_name: {where} does not serve {served_name!r}; it offers "
                             f"{', '.join(models)}")
        return served_name
    if len(models) > 1:
        raise InputError(f"model.served_name: {where} serves {len(models)} models ({', '.join(models)}); "
                         "name the one to measure")
    return models[0]


def _same_model(claimed: str, reported: str) -> bool:
    return claimed == reported or os.path.basename(claimed.rstrip("/")) == os.path.basename(reported.rstrip("/"))


#: the knobs an engine's self-report can confirm one for one (the context and the drafter are judged apart)
REPORTED_KNOBS = ("max_running_requests", "chunk_size", "kv_dtype", "tensor_parallel_size", "prefix_caching")


def verify_claims(candidate: Candidate, report: SelfReport, model_file: str | None, *,
                  adapter: LaunchedEngine | None = None) -> tuple[dict[str, Claim], list[str]]:
    """Per claim, what the check found (verified, contradicted, not verified), and the contradictions in words.
    `adapter`: the run's own (looked up from the candidate's engine for a caller without one)."""
    adapter = adapter or get_engine(candidate.engine)
    settings, knobs = report.settings, candidate.knobs
    found: dict[str, Claim] = {}
    wrong: list[str] = []

    def judge(name: str, claimed: Any, matches: bool | None, reported: Any) -> None:
        if matches is None:
            found[name] = NOT_VERIFIED
        else:
            found[name] = Claim(status="verified" if matches else "contradicted", value=reported, source="self_report")
        if matches is False:
            wrong.append(f"{name}: the candidate says {claimed}, the server reports {reported}")

    claimed_model = model_file or candidate.model.path or candidate.model.id
    if claimed_model:
        reported = settings.get("model_file")
        judge("model", claimed_model, None if reported is None else _same_model(claimed_model, str(reported)),
              reported)
    if candidate.model.served_name and settings.get("served_name") is not None:
        judge("served_name", candidate.model.served_name, settings["served_name"] == candidate.model.served_name,
              settings["served_name"])
    # the engine's own knob model says which of them it has (llama.cpp has no prefix_caching knob)
    simple = {name: getattr(knobs, name) for name in REPORTED_KNOBS if name in type(knobs).model_fields}
    for name, claimed in simple.items():
        if claimed is None:
            continue
        reported = settings.get(name)
        # `auto` asks the engine to choose, and the engine reports what it chose (SGLang: fp8_e4m3 for some models)
        resolvable = claimed == "auto" and reported is not None
        judge(f"knobs.{name}", claimed, None if reported is None or resolvable else str(reported) == str(claimed),
              reported)
        if resolvable:
            found[f"knobs.{name}"] = Claim(status="not_verified", value=reported, source="self_report",
                                           resolved_auto=True)
    effective = settings.get("effective_max_running_requests")
    if effective is not None and knobs.max_running_requests is not None and effective < knobs.max_running_requests:
        # the flag holds, but the scheduler runs fewer: the KV pool fits only this many at once
        found["knobs.max_running_requests"] = found.get("knobs.max_running_requests", NOT_VERIFIED).model_copy(
            update={"scheduler_limit": int(effective)})
    if knobs.context_length is not None:
        matches = adapter.context_matches(knobs.context_length, settings, knobs.max_running_requests)
        reported = settings.get("context_length", settings.get("context_per_slot"))
        judge("knobs.context_length", knobs.context_length, matches,
              reported if "context_length" in settings else f"{reported} per slot")
    parser = getattr(knobs.reasoning, "parser", None)
    if parser:  # vLLM and SGLang report the parser they run with ("" or null: none)
        reported = settings.get("reasoning_parser")
        judge("knobs.reasoning", f"reasoning parser {parser}", None if reported is None else reported == parser,
              f"reasoning parser {reported}" if reported else "no reasoning parser")
    active = settings.get("drafter_active")
    judge("knobs.drafter", knobs.drafter.kind, None if active is None else active == (knobs.drafter.kind != "none"),
          None if active is None else ("a drafter" if active else "no drafter"))
    return found, wrong


def wait_until_answering(adapter: LaunchedEngine, base_url: str, headers: dict, timeout_s: float, *,
                         transport: "httpx.BaseTransport | None" = None) -> None:
    """An attached server should be up already; give one that is still loading its ready timeout."""
    client = EngineClient(base_url, headers, transport=transport)
    deadline = time.monotonic() + timeout_s
    while not client.answers(adapter.health_path()):
        if time.monotonic() > deadline:
            raise InputError(f"launch.url {base_url}: the server answers, but {adapter.health_path()} did not "
                             f"report ready within {timeout_s:g} s")
        time.sleep(0.5)


def has_tokenizer(adapter: LaunchedEngine, base_url: str, headers: dict[str, str], model: str | None, *,
                  transport: "httpx.BaseTransport | None" = None) -> bool:
    """Whether the server turns text into token ids (prompts of exact length need it)."""
    import httpx

    client = EngineClient(base_url, headers, transport=transport)

    async def probe() -> bool:
        async with client.async_client() as http:
            try:
                return await adapter.tokenize(http, base_url, "servebook", model or "default", headers) is not None
            except (httpx.HTTPError, ValueError, KeyError, TypeError):
                return False

    return run_blocking(probe)


def check_tokenizer(adapter: LaunchedEngine, base_url: str, headers: dict[str, str], model: str | None,
                    needs: list[str], *, transport: "httpx.BaseTransport | None" = None) -> None:
    """InputError when the plan builds prompts of exact token length and the server has no tokenizer. Only a server
    whose engine servebook does not know is asked: every built-in engine's server tokenizes."""
    if needs and not adapter.tokenizer_known and not has_tokenizer(adapter, base_url, headers, model,
                                                                   transport=transport):
        raise InputError(f"plan: {', '.join(needs)} build prompts of exact token length through the engine's "
                         f"tokenizer, and {base_url} ({adapter.kind}) answers no tokenizer request; drop them from "
                         "the plan, or measure a server that exposes /tokenize")


def verify_attached(candidate: Candidate, adapter: LaunchedEngine, base_url: str, headers: dict,
                    model_file: str | None, needs_tokenizer: list[str] | None = None, *,
                    transport: "httpx.BaseTransport | None" = None) -> tuple[str | None, Verification]:
    """The model to measure and the verification record, or InputError when the server contradicts the candidate
    (nothing is recorded: the candidate describes another server). `transport` answers in place of the network."""
    if transport is None:
        check_reachable(base_url)
    wait_until_answering(adapter, base_url, headers, candidate.launch.ready_timeout_s, transport=transport)
    report = read_self_report(adapter, base_url, headers, transport=transport)
    model = select_model(report, candidate.model.served_name, base_url)
    found, wrong = verify_claims(candidate, report, model_file_name(model_file, adapter.model_format),
                                 adapter=adapter)
    if wrong:
        raise InputError(f"attach {base_url}: the server is not the candidate it claims to be: " + "; ".join(wrong))
    check_tokenizer(adapter, base_url, headers, model, needs_tokenizer or [], transport=transport)
    return model, Verification(claims=found, reported=report.record)


def launched_claims(found: dict[str, Claim], adapter: LaunchedEngine, argv: list[str]) -> dict[str, Claim]:
    """For an engine servebook launched, a claim its server does not report is what servebook passed it: shown with
    the flag and value from the command line (read back through the engine's one flag map), not as a bare claim.
    Only what the server reports back is verified."""
    out = dict(found)
    for claim, state in found.items():
        flag = adapter.flags.get(claim) if state == NOT_VERIFIED else None
        passed = on_command_line(argv, flag) if flag is not None else None
        if passed:
            out[claim] = Claim(status="on_command_line", value=passed, source="command_line")
    return out
