"""Any OpenAI-compatible endpoint: attach to a URL, or launch it with a command template.

servebook knows nothing of this engine's counters, so reconciliation is reported as not
available instead of being faked; whatever /metrics exposes is still scraped and kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pydantic import model_validator

from ..config.knobs import Drafter, Knobs
from . import _python_server
from ._base import Diagnosis, EngineAdapter, ServerCounts
from .registry import register

if TYPE_CHECKING:
    import httpx

    from ..config.candidate import Candidate
    from .counters import Scrape

PLACEHOLDERS = ("{host}", "{port}", "{model}")


class OpenAIDrafter(Drafter):
    engine_title: ClassVar[str] = "the generic openai engine"


class OpenAIKnobs(Knobs):
    """servebook's shared knobs, none of which it can apply to a server it does not know: each is refused."""

    engine_title: ClassVar[str] = "the generic openai engine"

    drafter: OpenAIDrafter = OpenAIDrafter()

    @model_validator(mode="after")
    def _applies_none(self) -> "OpenAIKnobs":
        modelled = {"chunk_size": self.chunk_size, "max_running_requests": self.max_running_requests,
                    "kv_dtype": self.kv_dtype, "context_length": self.context_length}
        set_knobs = [k for k, v in modelled.items() if v is not None]
        if self.reasoning is not None:
            set_knobs.append("reasoning")
        if set_knobs or self.drafter.kind != "none" or self.tensor_parallel_size != 1:
            raise ValueError(f"knobs.{(set_knobs or ['drafter'])[0]}: the generic openai engine cannot apply knobs; "
                             "put the engine's own flags in launch.command (and request fields in request_extras) "
                             "instead")
        return self


class OpenAIAdapter(EngineAdapter):
    kind = "openai"
    reconciles = False
    tokenizer_known = False
    api_key_flag = None  # its command template is the user's; the key is only sent with requests
    knobs_model = OpenAIKnobs

    def check(self, candidate: "Candidate") -> None:
        launch = candidate.launch
        if launch.mode == "local" and not launch.command:
            raise ValueError("launch.command: a local openai engine needs a launch command template "
                             "(or use mode: attach with launch.url)")
        if launch.command and not any(p in arg for arg in launch.command for p in ("{port}",)):
            raise ValueError("launch.command: the template must place {port} so servebook can find the server")

    def fixed_args(self, candidate: "Candidate", *, port: int, model_path: str, binary: str | None) -> list[str]:
        # the user's template is the whole command line: servebook maps no knob to a flag of a server it does not know
        template = candidate.launch.command or []
        values = {"host": candidate.launch.host, "port": str(port), "model": model_path}
        return [arg.format(**values) for arg in template]

    def request_extras(self, output_tokens: int) -> dict:
        # Unknown servers may reject unknown fields; the length is checked against usage instead.
        return {}

    def server_counts(self, before: "Scrape", after: "Scrape") -> ServerCounts | None:
        return None

    async def tokenize(self, http: "httpx.AsyncClient", base_url: str, text: str, model: str,
                       headers: dict[str, str]) -> list[int] | None:
        try:
            return await _python_server.tokenize_via(http, f"{base_url}/tokenize",
                                           {"prompt": text, "model": model, "add_special_tokens": False}, headers)
        except Exception:  # noqa: BLE001 - an unknown server may answer anything here
            return None

    def classify_failure(self, log_tail: str, exit_code: int | None) -> Diagnosis:
        return _python_server.classify(log_tail, exit_code)

    def health_path(self) -> str:
        return "/v1/models"


register(OpenAIAdapter())
