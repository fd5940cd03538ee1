"""Any OpenAI-compatible endpoint: attach to a URL, or launch it with a command template.

servebook knows nothing of this engine's counters, so reconciliation is reported as not
available instead of being faked; whatever /metrics exposes is still scraped and kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _gpu, register
from ._base import Diagnosis, EngineAdapter, ServerCounts

if TYPE_CHECKING:
    from ..config.candidate import Candidate
    from .counters import Scrape

PLACEHOLDERS = ("{host}", "{port}", "{model}")


class OpenAIAdapter(EngineAdapter):
    kind = "openai"
    reconciles = False
    tokenizer_known = False
    api_key_flag = None  # its command template is the user's; the key is only sent with requests

    def check(self, candidate: "Candidate") -> None:
        self.check_common_knobs(candidate)
        knobs = candidate.knobs
        modelled = {"chunk_size": knobs.chunk_size, "max_running_requests": knobs.max_running_requests,
                    "kv_dtype": knobs.kv_dtype, "context_length": knobs.context_length}
        set_knobs = [k for k, v in modelled.items() if v is not None]
        if set_knobs or knobs.drafter.kind != "none" or knobs.tensor_parallel_size != 1:
            raise ValueError(f"knobs.{(set_knobs or ['drafter'])[0]}: the generic openai engine cannot apply knobs; "
                             "put the engine's own flags in launch.command instead")
        launch = candidate.launch
        if launch.mode == "local" and not launch.command:
            raise ValueError("launch.command: a local openai engine needs a launch command template "
                             "(or use mode: attach with launch.url)")
        if launch.command and not any(p in arg for arg in launch.command for p in ("{port}",)):
            raise ValueError("launch.command: the template must place {port} so servebook can find the server")

    def argv(self, candidate: "Candidate", *, port: int, model_path: str, draft_path: str | None,
             binary: str | None = None, backend: str | None = None) -> list[str]:
        template = candidate.launch.command or []
        values = {"host": candidate.launch.host, "port": str(port), "model": model_path}
        return [arg.format(**values) for arg in template] + list(candidate.extra_args)

    def request_extras(self, output_tokens: int) -> dict:
        # Unknown servers may reject unknown fields; the length is checked against usage instead.
        return {}

    def server_counts(self, before: "Scrape", after: "Scrape") -> ServerCounts | None:
        return None

    async def tokenize(self, http, base_url: str, text: str, model: str, headers: dict) -> list[int] | None:
        try:
            return await _gpu.tokenize_via(http, f"{base_url}/tokenize",
                                           {"prompt": text, "model": model, "add_special_tokens": False}, headers)
        except Exception:  # noqa: BLE001 - an unknown server may answer anything here
            return None

    def classify_failure(self, log_tail: str, exit_code: int | None) -> Diagnosis:
        return _gpu.classify(log_tail, exit_code)

    def health_path(self) -> str:
        return "/v1/models"


register(OpenAIAdapter())
