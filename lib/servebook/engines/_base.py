"""The small interface every engine adapter implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..candidate import Candidate
    from ..metrics import Scrape


@dataclass(frozen=True)
class ServerCounts:
    """Token counts the engine itself reports over an interval (None: the engine has no such counter).

    `prompt_tokens` always INCLUDES cached tokens here, whatever the engine's own convention,
    so that it compares directly with the client's `usage.prompt_tokens`.
    """

    prompt_tokens: float | None
    cached_tokens: float | None
    generation_tokens: float | None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None


@dataclass(frozen=True)
class FailureCause:
    cause: str  # bad_flag | out_of_memory | model_load | port_in_use | timeout | crash
    message: str


class EngineAdapter(ABC):
    kind: str
    #: the flags the adapter itself sets from knobs, to refuse the same flag in extra_args
    owned_flags: frozenset[str] = frozenset()

    @abstractmethod
    def check(self, candidate: "Candidate") -> None:
        """Raise ValueError naming the field when a knob is unknown to or unsupported by this engine."""

    @abstractmethod
    def argv(self, candidate: "Candidate", *, port: int, model_path: str, draft_path: str | None) -> list[str]:
        """The engine's command line, as a list (never a shell string)."""

    @abstractmethod
    def server_counts(self, before: "Scrape", after: "Scrape") -> ServerCounts | None:
        """Counter deltas over an interval in client-comparable terms; None when /metrics is off."""

    def request_extras(self) -> dict:
        """Fields sent through the SDK's extra_body to force output length."""
        return {"ignore_eos": True}

    @abstractmethod
    def classify_failure(self, log_tail: str, exit_code: int | None) -> FailureCause:
        """Why the engine did not come up or died, from its log."""

    def error_lines(self, log_text: str) -> list[str]:
        """The lines of an engine log that report errors."""
        return [line.strip() for line in log_text.splitlines() if "error" in line.lower()]

    def health_path(self) -> str:
        return "/health"
