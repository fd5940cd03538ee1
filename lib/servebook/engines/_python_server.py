"""What SGLang and vLLM share: failure signatures of Python GPU servers, and their tokenizer call."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import Field, model_validator

from ..config.knobs import Drafter, Knobs, Reasoning
from ..util.errors import FailureCause
from ._base import Diagnosis, EngineAdapter, classify_by_patterns
from .contracts import contract_for
from .flags import Resolved

if TYPE_CHECKING:
    import httpx

    from ..config.candidate import Candidate

FAILURE_PATTERNS: list[tuple[FailureCause, re.Pattern[str]]] = [
    ("port_in_use", re.compile(r"address already in use|errno 98", re.I)),
    ("bad_flag", re.compile(r"unrecognized arguments|error: argument|invalid choice|"
                            r"the following arguments are required", re.I)),
    ("out_of_memory", re.compile(r"CUDA out of memory|OutOfMemoryError|not enough memory|"
                                 r"insufficient memory|cudaErrorMemoryAllocation|No available memory|"
                                 # vLLM's commonest: one request's KV cache does not fit (kv_cache_planning.py)
                                 r"larger than the available KV cache memory|"
                                 # SGLang's (scheduler.py, 0.5.x): the weights fill --mem-fraction-static; the
                                 # scheduler's ValueError comes first, then SGLang SIGKILLs its own process tree
                                 r"leave no GPU memory for the KV cache", re.I)),
    ("warmup_failed", re.compile(r"warm ?up .*(fail|error)|(fail|error).*warm ?up", re.I)),
    ("model_load", re.compile(r"(Repository|Model) not found|No such file|failed to load|"
                              r"does not appear to have a file|Cannot find model|"
                              # the hub offline and no local copy (huggingface_hub, as vLLM 0.26 logs it)
                              r"LocalEntryNotFoundError|Cannot find an appropriate cached snapshot|"
                              r"is not a local folder and is not a valid model identifier", re.I)),
]


def classify(log_tail: str, exit_code: int | None) -> Diagnosis:
    return classify_by_patterns(FAILURE_PATTERNS, log_tail, exit_code)


def error_lines(log_text: str) -> list[str]:
    return [line.strip() for line in log_text.splitlines()
            if re.search(r"\b(ERROR|Traceback|Exception|error:)", line)]


async def tokenize_via(http: "httpx.AsyncClient", url: str, payload: dict[str, Any],
                       headers: dict[str, str]) -> list[int] | None:
    response = await http.post(url, json=payload, headers=headers)
    if response.status_code == 404:
        return None
    response.raise_for_status()
    body = response.json()
    return body.get("tokens") or body.get("input_ids")


class PythonServerDrafter(Drafter):
    """The drafter settings vLLM and SGLang share (llama.cpp's synthetic acceptance is not among them)."""

    @classmethod
    def refusal(cls, key: str) -> str:
        if key.startswith("synthetic_"):
            return "knobs.drafter.synthetic_*: synthetic acceptance is a llama.cpp benchmarking feature"
        return super().refusal(key)


class PythonServerReasoning(Reasoning):
    """vLLM's and SGLang's reasoning settings: the parser that moves the model's thinking out of `content` (a
    server flag), and per chat request the template's enable_thinking and reasoning_effort."""

    parser: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
                               description="the engine's reasoning parser (--reasoning-parser NAME: qwen3, "
                                           "deepseek_r1, ...); without one the thinking stays in the answer's text")

    @classmethod
    def refusal(cls, key: str) -> str:
        if key == "budget":
            return (f"knobs.reasoning.budget is llama.cpp's --reasoning-budget; servebook sets no thinking budget on "
                    f"{cls.engine_title} (send its own request field through request_extras)")
        if key == "format":
            return (f"knobs.reasoning.format is llama.cpp's --reasoning-format; {cls.engine_title} separates "
                    "reasoning with knobs.reasoning.parser (--reasoning-parser)")
        return super().refusal(key)


def reasoning_parser(value: PythonServerReasoning | None, resolved: Resolved) -> list[str]:
    """The flag render of knobs.reasoning on vLLM and SGLang: only the parser is a server flag."""
    return ["--reasoning-parser", value.parser] if value is not None and value.parser else []


def reasoning_request(reasoning: Reasoning | None) -> dict[str, Any]:
    """What a chat request carries for knobs.reasoning on vLLM and SGLang: the chat template's switch and the effort
    (both engines read them per request; vLLM 0.26 chat_completion/protocol.py, SGLang openai/protocol.py)."""
    out: dict[str, Any] = {}
    if reasoning is not None and reasoning.mode is not None:
        out["chat_template_kwargs"] = {"enable_thinking": reasoning.mode == "on"}
    if reasoning is not None and reasoning.effort is not None:
        out["reasoning_effort"] = reasoning.effort
    return out


class PythonServerKnobs(Knobs):
    """The knobs vLLM and SGLang share: their own KV dtypes (kv_types), and a prefix cache that can be turned off."""

    drafter: PythonServerDrafter = PythonServerDrafter()
    reasoning: PythonServerReasoning | None = None
    prefix_caching: bool | None = Field(
        None, description="the engine's cache of prompt prefixes shared across requests (vLLM's prefix caching, "
                          "SGLang's radix cache; both on by default); false turns it off")

    @classmethod
    def refusal(cls, key: str) -> str:
        if key == "gpu_layers":
            return f"knobs.gpu_layers is a llama.cpp setting; {cls.engine_title} places every layer itself"
        if key == "prompt_cache_mib":
            return (f"knobs.prompt_cache_mib is llama.cpp's host-memory prompt cache (--cache-ram); "
                    f"{cls.engine_title} has no such cache: leave it unset")
        return super().refusal(key)

    @model_validator(mode="after")
    def _known_kv_dtype(self) -> "PythonServerKnobs":
        if self.kv_dtype is not None and self.kv_dtype not in self.kv_types:
            raise ValueError(f"knobs.kv_dtype: {self.engine_title} accepts {', '.join(self.kv_types)}, "
                             f"not {self.kv_dtype!r}")
        return self


def listen_host(candidate: "Candidate") -> str:
    """Where a Python server listens: the candidate's host, or every address inside a container."""
    return candidate.launch.host if candidate.launch.mode != "compose" else "0.0.0.0"


def switch(on: str | None, off: str | None) -> Any:
    """A flag render for a boolean knob: `on` when true, `off` when false, nothing when unset."""
    def render(value: bool | None, resolved: Resolved) -> list[str]:
        flag = None if value is None else (on if value else off)
        return [flag] if flag else []
    return render


class PythonServerAdapter(EngineAdapter):
    """What SGLang and vLLM servers have in common: a /tokenize endpoint and Python failure logs."""

    # vLLM 0.26 put its EngineCore's ValueError 93 lines above the end of a 155-line log (seen on an H200)
    diagnosis_lines = 400
    model_format = "hf"

    def uses_gpus(self, candidate: "Candidate") -> bool:
        return True

    def sizes_memory_from_free(self, candidate: "Candidate") -> bool:
        return True  # a memory fraction of the device, checked against and profiled from its free memory

    def chat_extras(self, candidate: "Candidate") -> dict[str, Any]:
        return reasoning_request(candidate.knobs.reasoning)

    def check(self, candidate: "Candidate") -> None:
        super().check(candidate)
        reasoning = candidate.knobs.reasoning
        parser = getattr(reasoning, "parser", None)
        contract = contract_for(self.kind, candidate.pins.engine_version)
        choices = flag.choices if contract is not None and (flag := contract.flag("--reasoning-parser")) else None
        if parser and choices and parser not in choices:
            raise ValueError(f"knobs.reasoning.parser: {self.kind} {contract.version} has no reasoning parser "  # type: ignore[union-attr]
                             f"{parser!r}; its parsers are {', '.join(choices)}")

    def local_binary(self, candidate: "Candidate", reporter: Any) -> str:
        """The server's own command where it is installed on this host (named as the engine is), else the
        candidate's launch.command."""
        import shutil

        return shutil.which(self.kind) or super().local_binary(candidate, reporter)

    async def tokenize(self, http: "httpx.AsyncClient", base_url: str, text: str, model: str,
                       headers: dict[str, str]) -> list[int] | None:
        return await tokenize_via(http, f"{base_url}/tokenize",
                                  {"prompt": text, "model": model, "add_special_tokens": False}, headers)

    def classify_failure(self, log_tail: str, exit_code: int | None) -> Diagnosis:
        return classify(log_tail, exit_code)

    def error_lines(self, log_text: str) -> list[str]:
        return error_lines(log_text)
