"""What SGLang and vLLM share: failure signatures of Python GPU servers, and their tokenizer call."""

from __future__ import annotations

import re

from ..util.errors import FailureCause
from ._base import Diagnosis, EngineAdapter, classify_by_patterns

FAILURE_PATTERNS: list[tuple[FailureCause, re.Pattern[str]]] = [
    ("port_in_use", re.compile(r"address already in use|errno 98", re.I)),
    ("bad_flag", re.compile(r"unrecognized arguments|error: argument|invalid choice|"
                            r"the following arguments are required", re.I)),
    ("out_of_memory", re.compile(r"CUDA out of memory|OutOfMemoryError|not enough memory|"
                                 r"insufficient memory|cudaErrorMemoryAllocation|No available memory|"
                                 # vLLM's commonest: one request's KV cache does not fit (kv_cache_planning.py)
                                 r"larger than the available KV cache memory", re.I)),
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


async def tokenize_via(http, url: str, payload: dict, headers: dict) -> list[int] | None:
    response = await http.post(url, json=payload, headers=headers)
    if response.status_code == 404:
        return None
    response.raise_for_status()
    body = response.json()
    return body.get("tokens") or body.get("input_ids")


def knob_args(knobs, flags: dict[str, tuple[str, ...]]) -> list[str]:
    """Each knob that is set, as its engine's flag(s) and value, in the order of `flags`."""
    args: list[str] = []
    for knob, spelling in flags.items():
        value = getattr(knobs, knob)
        if value is None or (knob == "tensor_parallel_size" and value == 1):
            continue
        args += [*spelling, str(value)]
    return args


class PythonServerAdapter(EngineAdapter):
    """What SGLang and vLLM servers have in common: a /tokenize endpoint and Python failure logs."""

    #: the engine's name in messages, and the KV cache dtypes it accepts
    title: str = ""
    kv_types: tuple[str, ...] = ()
    # vLLM 0.26 put its EngineCore's ValueError 93 lines above the end of a 155-line log (seen on an H200)
    diagnosis_lines = 400
    model_format = "hf"

    def uses_gpus(self, candidate) -> bool:
        return True

    def check_common(self, candidate) -> None:
        """The checks SGLang and vLLM share: a KV dtype they know, no llama.cpp-only settings."""
        self.check_common_knobs(candidate)
        knobs = candidate.knobs
        if knobs.kv_dtype is not None and knobs.kv_dtype not in self.kv_types:
            raise ValueError(f"knobs.kv_dtype: {self.title} accepts {', '.join(self.kv_types)}, "
                             f"not {knobs.kv_dtype!r}")
        if knobs.drafter.synthetic_length or knobs.drafter.synthetic_rates:
            raise ValueError("knobs.drafter.synthetic_*: synthetic acceptance is a llama.cpp benchmarking feature")

    async def tokenize(self, http, base_url: str, text: str, model: str, headers: dict) -> list[int] | None:
        return await tokenize_via(http, f"{base_url}/tokenize",
                                  {"prompt": text, "model": model, "add_special_tokens": False}, headers)

    def classify_failure(self, log_tail: str, exit_code: int | None) -> Diagnosis:
        return classify(log_tail, exit_code)

    def error_lines(self, log_text: str) -> list[str]:
        return error_lines(log_text)
