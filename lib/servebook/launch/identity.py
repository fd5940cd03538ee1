"""Who an engine is by its own account, read once it answers, as one frozen record.

A launched engine is asked once it is ready; an attached server before anything is recorded
(a server that contradicts the candidate is refused then, launch.verify). The record holds the
model to measure, each claim of the candidate checked against the engine's report, and the raw
answers the run keeps (self_report.json, server_info.json). Checking it against the candidate
(a model not served, another release than the pinned one) is a run's failure at launch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config.candidate import Candidate
from ..config.claims import Verification
from ..config.errors import InputError
from ..models.random_models import model_file_name
from ..util.errors import EngineFailed
from .verify import (
    launched_claims,
    read_self_report,
    read_server_info,
    select_model,
    verify_attached,
    verify_claims,
)

if TYPE_CHECKING:
    import httpx

    from ..engines import EngineAdapter


@dataclass(frozen=True)
class EngineIdentity:
    """What the engine says it is, and the candidate's claims checked against it."""

    #: the model name measured requests are sent to (None: the endpoint's default)
    served_model: str | None
    verification: Verification
    #: what the self-report paths answered, kept with a launched run so a claim can be read again
    self_report: dict[str, Any] | None = None
    #: what the engine's first answering info path said (its version, its server args)
    server_info: dict[str, Any] | None = None
    #: why the candidate's model cannot be measured here: the engine does not serve it
    not_served: str | None = None

    @property
    def version(self) -> str | None:
        """The release the engine reports (vLLM and SGLang's `version`, llama.cpp's
        `build_info`)."""
        info = self.server_info or {}
        build = info.get("build_info")
        version = info.get("version") or (build if isinstance(build, str) else None)
        return str(version) if version else None

    @property
    def settings(self) -> dict[str, Any]:
        """The engine's settings in knob terms (slots, context), as it reported them."""
        return self.verification.settings

    def kept(self) -> dict[str, dict[str, Any]]:
        """The answers a run keeps, by file name."""
        files = {"self_report.json": self.self_report, "server_info.json": self.server_info}
        return {name: body for name, body in files.items() if body is not None}

    def check(self, candidate: Candidate, reported_version: str | None) -> None:
        """EngineFailed at launch when the engine cannot be measured as the candidate: it does not
        serve the named model, or it is another release than the one the candidate is pinned to
        (a gate on "the new version" that measured the old one would pass for the wrong reason).
        An engine that reports no version is not checked."""
        if self.not_served is not None:
            raise EngineFailed("model_not_served", self.not_served, stage="launch")
        pinned = candidate.pins.engine_version
        if pinned and reported_version and pinned not in reported_version:
            message = (f"pins.engine_version is {pinned!r}, but the engine reports "
                       f"{reported_version!r}")
            raise EngineFailed("version_mismatch", message, stage="launch")


def identify_launched(candidate: Candidate, adapter: EngineAdapter, base_url: str,
                      headers: dict[str, str], argv: list[str], *,
                      transport: httpx.BaseTransport | None = None) -> EngineIdentity:
    """A launched engine, asked once it is ready. `argv` is the recorded (redacted) command line: a
    claim the server does not report is shown as what servebook passed it."""
    report = read_self_report(adapter, base_url, headers, transport=transport)
    # the file the engine was given: llama.cpp's -m, else the candidate's model as this engine reads
    # it (a vLLM `random:1b` is the Hugging Face directory it resolves to, which the server reports)
    model_file = adapter.model_file(argv) or model_file_name(candidate.model.path,
                                                             adapter.model_format)
    claims, _ = verify_claims(candidate, report, model_file, adapter=adapter)
    claims = launched_claims(claims, adapter, argv)
    verification = Verification(claims=claims, reported=report.record)
    try:
        served = select_model(report, candidate.model.served_name, base_url)
    except InputError as error:  # a launched engine not serving the named model failed to load it
        return EngineIdentity(None, verification, report.bodies, not_served=str(error))
    info = read_server_info(adapter, base_url, headers, transport=transport)
    return EngineIdentity(served, verification, report.bodies, info)


def identify_attached(candidate: Candidate, adapter: EngineAdapter, base_url: str,
                      headers: dict[str, str], model_file: str | None,
                      needs_tokenizer: list[str] | None = None, *,
                      transport: httpx.BaseTransport | None = None) -> EngineIdentity:
    """A server servebook did not start, asked before anything is recorded: InputError when it
    contradicts the candidate (launch.verify.verify_attached)."""
    served, verification = verify_attached(candidate, adapter, base_url, headers, model_file,
                                           needs_tokenizer, transport=transport)
    info = read_server_info(adapter, base_url, headers, transport=transport)
    return EngineIdentity(served, verification, server_info=info)
