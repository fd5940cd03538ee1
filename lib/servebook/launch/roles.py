"""What launching, watching and verifying an engine needs of its adapter: the launch layer's own protocol.

The engine adapters (servebook.engines) satisfy it; launch names only these members, so an engine is free to
change the rest, and a test double needs only these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import httpx

    from ..config.candidate import Candidate
    from ..engines._base import Diagnosis
    from ..engines.flags import Flag
    from ..engines.model_specs import ModelFormat


class LaunchedEngine(Protocol):
    """An engine as launch sees it: its command line, its container, its readiness, its failures, its self-report."""

    @property
    def kind(self) -> str: ...
    @property
    def model_format(self) -> "ModelFormat": ...
    @property
    def flags(self) -> "Mapping[str, Flag]": ...
    @property
    def api_key_flag(self) -> str | None: ...
    @property
    def container_port(self) -> int: ...
    @property
    def compile_cache_env(self) -> tuple[str, ...]: ...
    @property
    def diagnosis_lines(self) -> int: ...
    @property
    def self_report_paths(self) -> tuple[str, ...]: ...
    @property
    def info_paths(self) -> tuple[str, ...]: ...
    @property
    def tokenizer_known(self) -> bool: ...

    def argv(self, candidate: "Candidate", *, port: int, model_path: str, draft_path: str | None,
             binary: str | None = None, backend: str | None = None) -> list[str]: ...

    def launch_env(self, candidate: "Candidate") -> dict[str, str]: ...

    def uses_gpus(self, candidate: "Candidate") -> bool: ...

    def sizes_memory_from_free(self, candidate: "Candidate") -> bool: ...

    def health_path(self) -> str: ...

    def classify_failure(self, log_tail: str, exit_code: int | None) -> "Diagnosis": ...

    def reported_settings(self, bodies: dict[str, Any]) -> dict[str, Any]: ...

    async def tokenize(self, http: "httpx.AsyncClient", base_url: str, text: str, model: str,
                       headers: dict[str, str]) -> list[int] | None: ...
