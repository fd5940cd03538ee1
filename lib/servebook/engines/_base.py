"""The interface every engine adapter implements; its consumers name the parts they use.

`launch.roles.LaunchedEngine` is what starting, watching and verifying an engine needs of it, and
`measure.roles.MeasuredEngine` what measuring it needs: each consumer owns its protocol, and every adapter here
satisfies both (mypy checks it where run.py hands an adapter over). The knobs an engine takes are its own pydantic
model (`knobs_model`), and the flags they set one map (`flags`), which builds the command line, guards extra_args
and reads a launched engine's settings back.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ..config.knobs import Knobs
from ..util.errors import EngineFailed, FailureCause, InputError
from .contracts import contract_for, spelled_flag
from .counters import Gauge
from .flags import Flag, Resolved, command_args, flag_after, value_at
from .flags import owned as owned_flags

#: how an engine reads a model: one GGUF file (llama.cpp) or a Hugging Face checkpoint directory (vLLM, SGLang)
ModelFormat = Literal["gguf", "hf"]
MODEL_FORMATS: tuple[ModelFormat, ...] = ("gguf", "hf")

if TYPE_CHECKING:
    import httpx

    from ..config.candidate import Candidate
    from ..config.plan import Plan
    from .contracts import Contract
    from .counters import Scrape


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
    #: decode steps that verified a drafter's proposal (SGLang counts these, not drafted tokens)
    verify_passes: float | None = None

    @property
    def drafted(self) -> float | None:
        """Evidence that a drafter ran: drafted tokens where the engine counts them, else verify passes."""
        return self.draft_tokens if self.draft_tokens is not None else self.verify_passes


@dataclass(frozen=True)
class Diagnosis:
    """What an adapter reads out of an engine's log: the cause (a code) and the line that shows it (prose)."""

    cause: FailureCause
    message: str

    def failed(self, log_tail: str = "", exit_code: int | None = None) -> EngineFailed:
        return EngineFailed(self.cause, self.message, log_tail=log_tail, exit_code=exit_code)


#: a traceback's frame or source line, indented after any process prefix (vLLM's `(APIServer pid=5533) `): it names
#: the exception that the line below it states with its message (`    raise LocalEntryNotFoundError(` above
#: `huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache ...`)
_TRACEBACK_ECHO = re.compile(r"(\([\w-]+ pid=\d+\) )?\s")


def classify_by_patterns(patterns: list[tuple[FailureCause, re.Pattern[str]]], log_tail: str,
                         exit_code: int | None) -> Diagnosis:
    """The first cause whose pattern matches a log line (in the order given), else how the process ended. The reason
    is the engine's statement of the error, preferred to a traceback's echo of the code that raised it."""
    lines = log_tail.splitlines()
    for cause, pattern in patterns:
        matches = [line for line in lines if pattern.search(line)]
        if matches:
            stated = [line for line in matches if not _TRACEBACK_ECHO.match(line)]
            return Diagnosis(cause, (stated or matches)[0].strip())
    if exit_code is not None and exit_code < 0:
        return Diagnosis("crash", f"engine killed by signal {-exit_code}")
    if exit_code is not None:
        return Diagnosis("crash", f"engine exited with code {exit_code}")
    return Diagnosis("crash", "engine stopped answering")


@dataclass(frozen=True)
class KvLog:
    """A KV cache allocation as the engine logged it: total cells (tokens) over all streams, and bytes."""

    cells: int
    bytes: float
    k_type: str | None = None


@dataclass(frozen=True)
class ServerTimings:
    """What an engine says, per request, of its own time (llama.cpp's `timings`): the prompt, the decode rate, and
    the drafts it made and had accepted."""

    prompt_ms: float | None = None
    predicted_per_second: float | None = None
    draft_tokens: int | None = None
    draft_accepted: int | None = None


class EngineAdapter(ABC):
    kind: str
    #: the engine's knob model (its own fields, checks and words); registered with config by `register`
    knobs_model: ClassVar[type[Knobs]] = Knobs
    #: candidate field -> the flags that set it, in command-line order (see flags.py): written once, read three ways
    flags: ClassVar[dict[str, Flag]] = {}
    #: flags servebook always sets itself (host, port, the model, metrics): refused in extra_args as "launch"
    launch_flags: ClassVar[tuple[str, ...]] = ()
    #: the flags that give a launched engine its model file, where the model is a flag's value
    model_file_flags: ClassVar[tuple[str, ...]] = ()
    #: log lines that mean the engine compiled something (a measured interval must not contain one)
    compile_pattern: re.Pattern | None = None
    #: where the engine describes itself (version, server args), for the environment fingerprint
    info_paths: tuple[str, ...] = ()
    #: what the reconciliation can rely on
    reconciles: bool = True
    #: the port the engine listens on inside its container (compose launches)
    container_port: int = 8000
    #: environment variables that point the engine's compile caches somewhere (one folder per replica)
    compile_cache_env: tuple[str, ...] = ()
    #: bytes in a process's command line that mark it as this engine (another engine busy on the host)
    process_markers: tuple[bytes, ...] = ()
    #: whether the engine is a local binary whose --version and model file go into the fingerprint
    fingerprints_binary: bool = False
    #: the form a `tiny:` / `random:` model takes for this engine: a GGUF file, or a Hugging Face directory ("hf")
    model_format: "ModelFormat" = "gguf"
    #: how many of the log's last lines a failure is diagnosed from (a Python server prints its root cause, then the
    #: tracebacks of every process it brings down: vLLM's API server ends with "See root cause above")
    diagnosis_lines: int = 40
    #: the flag that makes the engine require an API key (llama.cpp, vLLM and SGLang all take --api-key)
    api_key_flag: str | None = "--api-key"
    #: whether the engine's parser takes an unambiguous prefix of a flag (argparse's allow_abbrev), and whether it
    #: reads `--max_num_seqs` as `--max-num-seqs`: both ways an extra_arg could reach an owned flag
    flag_prefixes: bool = False
    flag_underscores: bool = False
    #: the flag that sets the name the API answers to (model.served_name)
    served_name_flag: str | None = None
    #: whether the engine's server always answers `tokenize` (False: an unknown server, asked before measuring)
    tokenizer_known: bool = True
    #: where the engine reports the settings it actually runs with (read besides /v1/models)
    self_report_paths: tuple[str, ...] = ()
    #: Prometheus histograms of the engine's own time per request, waiting for a slot and processing the prompt
    #: (None: the engine reports none that servebook has checked); a cell's mean is the change in sum / count
    queue_histogram: str | None = None
    prefill_histogram: str | None = None
    #: the engine's own time-to-first-token histogram (vLLM's clock starts when its front end has the request)
    ttft_histogram: str | None = None
    #: the load gauges the engine exports (KV usage, running, waiting, preemptions), sampled while a cell runs
    #: (measure.observers.gauges); what it does not export is absent
    gauges: ClassVar[tuple[Gauge, ...]] = ()
    #: whether a response's usage leaves prompt_tokens_details out when no prompt token came from the cache, so
    #: that its absence means 0 (SGLang under --enable-cache-report); otherwise an absent count is "not reported"
    usage_omits_zero_cached: ClassVar[bool] = False

    @property
    def owned(self) -> dict[str, tuple[str, ...]]:
        """Knob -> every spelling of the flags that knob sets; the same flag in extra_args is refused."""
        return owned_flags(self.flags, self.launch_flags)

    def model_file(self, argv: list[str]) -> str | None:
        """The model file a launched engine was given on its command line (None: not given as a flag's value)."""
        return flag_after(argv, self.model_file_flags) if self.model_file_flags else None

    def context_matches(self, claimed: int, settings: dict[str, Any], slots: int | None) -> bool | None:
        """Whether the context the engine reports is the one claimed (None: it reports none)."""
        return settings["context_length"] == claimed if "context_length" in settings else None

    def server_timings(self, extra: dict[str, Any] | None) -> ServerTimings | None:
        """The engine's own timings of one request, from the extra fields of a streamed chunk (None: it sends none)."""
        return None

    def launch_env(self, candidate: "Candidate") -> dict[str, str]:
        """Environment servebook gives a launched engine besides the candidate's own `launch.env` (which wins):
        what makes the engine report its settings, never what changes how it serves."""
        return {}

    def context_per_request(self, candidate: "Candidate") -> int | None:
        """The most tokens one request may hold under this candidate, when its knobs say (None: unknown)."""
        return candidate.knobs.context_length

    def check_plan_fits(self, candidate: "Candidate", plan: "Plan") -> None:
        """Refuse, before launch, a plan whose longest request cannot fit the candidate's context per request."""
        longest = plan.longest_requests()  # always: it reads the plan's traces, which must fail before launch
        limit = self.context_per_request(candidate)
        if limit is None:
            return
        too_long = [f"{where} needs {tokens} tokens" for where, tokens in longest if tokens > limit]
        if too_long:
            raise InputError(f"plan: {'; '.join(too_long)}, but {candidate.label} holds {limit} tokens per request "
                             f"(knobs.context_length{self.context_note})")

    #: how the context per request follows from the knobs, for the message above
    context_note: str = ""

    def logged_kv_cache(self, log_text: str) -> "KvLog | None":
        """The KV cache the engine says it allocated at load, when its log says (llama.cpp does)."""
        return None

    def reported_settings(self, bodies: dict[str, Any]) -> dict[str, Any]:
        """What the engine says it runs with, in knob terms, from the JSON bodies of `self_report_paths` and
        /v1/models. Keys: model_file, served_name, max_running_requests, context_length (total) or
        context_per_slot, chunk_size, tensor_parallel_size, kv_dtype, drafter_active. Absent: not reported."""
        return {}

    def backend(self) -> str | None:
        """The compute backend of the engine build servebook would launch ("cuda", "cpu"; None: not servebook's)."""
        return None

    def build_fingerprint(self, candidate: "Candidate") -> dict:
        """What the environment records of the engine's build (servebook-built engines only)."""
        return {}

    def uses_gpus(self, candidate: "Candidate") -> bool:
        """Whether this candidate runs on the host's GPUs (so preflight checks them and telemetry samples them)."""
        return False

    def sizes_memory_from_free(self, candidate: "Candidate") -> bool:
        """Whether this candidate sizes its memory from what the device has free at start, so that a neighbour
        loading on the same GPU at the same time is charged to it (replicas sharing a GPU then start in turn)."""
        return False

    def local_binary(self, candidate: "Candidate", reporter: Any) -> str:
        """The program that launches this engine on this host; InputError when it is not installed."""
        if candidate.launch.command:
            return candidate.launch.command[0]
        raise InputError(f"engine: {self.kind} is not installed on this host; use launch.mode: compose with an "
                         "image, launch.mode: attach with the URL of a running server, or launch.simulator: true "
                         "to exercise the path against servebook's simulator")

    def owner_of(self, flag: str, contract: "Contract | None" = None) -> tuple[str, str] | None:
        """(knob, owned flag) when the engine would read `flag` as a flag a knob sets, else None. With the engine's
        recorded contract the parser's own reading decides; without it, any prefix of an owned flag counts."""
        owned = {option: knob for knob, options in self.owned.items() for option in options}
        if contract is not None:
            resolved = contract.resolve(flag)
            hit = next((o for o in resolved.options if o in owned), None) if resolved else None
            return (owned[hit], hit) if hit else None
        spelled = spelled_flag(flag, self.flag_underscores)
        for option, knob in owned.items():
            option = spelled_flag(option, self.flag_underscores)
            if spelled == option or (self.flag_prefixes and spelled.startswith("--") and len(spelled) > 3
                                     and option.startswith(spelled)):
                return knob, option
        return None

    def check_extra_args(self, candidate: "Candidate") -> None:
        contract = contract_for(self.kind, candidate.pins.engine_version)
        for arg in candidate.extra_args:
            flag = arg.split("=", 1)[0]
            if not re.match(r"-[-A-Za-z]", flag) or (candidate.launch.simulator and flag.startswith("--sim-")):
                continue  # a value, or a setting of servebook's simulator
            if contract is not None and contract.resolve(flag) is None:
                raise ValueError(f"extra_args: {flag} is not a flag of {self.kind} {contract.version} (or an "
                                 f"ambiguous prefix), by the contract recorded from its parser on {contract.recorded}")
            owner = self.owner_of(flag, contract)
            if owner is not None and not self._yields(candidate, owner[0]):
                knob, owned = owner
                where = f"knobs.{knob}" if knob != "launch" else "launch/model (servebook sets it)"
                spelled = "" if owned == flag else f" (the engine reads it as {owned})"
                raise ValueError(f"extra_args: {flag}{spelled} conflicts with {where}; set it there instead")

    def _yields(self, candidate: "Candidate", knob: str) -> bool:
        """Whether knob `knob` leaves its flags to extra_args: its flag yields and the candidate's value writes none."""
        flag = self.flags.get(f"knobs.{knob}")
        return flag is not None and flag.yields and not flag.args(value_at(candidate, f"knobs.{knob}"), Resolved())

    async def tokenize(self, http: "httpx.AsyncClient", base_url: str, text: str, model: str,
                       headers: dict[str, str]) -> list[int] | None:
        """Token ids of `text` without special tokens, through the engine's own tokenizer; None if it has none."""
        return None

    async def render_chat(self, http: "httpx.AsyncClient", base_url: str, body: dict[str, Any],
                          headers: dict[str, str]) -> list[int] | None:
        """The token ids of a chat request's prompt (`messages` and `tools`) as the engine builds it, its chat template
        applied, through the engine itself; None where it offers no way to ask."""
        return None

    def check(self, candidate: "Candidate") -> None:
        """Raise ValueError naming the field when the candidate asks what this engine cannot do. Its knobs were
        checked by the engine's knob model already; what is left involves the rest of the candidate."""
        self.check_extra_args(candidate)

    @abstractmethod
    def fixed_args(self, candidate: "Candidate", *, port: int, model_path: str, binary: str | None) -> list[str]:
        """The start of the command line, before the mapped settings: the program and what servebook always sets."""

    def argv(self, candidate: "Candidate", *, port: int, model_path: str, draft_path: str | None,
             binary: str | None = None, backend: str | None = None) -> list[str]:
        """The engine's command line, as a list (never a shell string). Pure: `binary` and `backend` are what
        preflight resolved (None in a dry run), so the same candidate gives the same line whatever is cached."""
        return [*self.fixed_args(candidate, port=port, model_path=model_path, binary=binary),
                *command_args(candidate, self.flags, Resolved(draft_path, backend)), *candidate.extra_args]

    @abstractmethod
    def server_counts(self, before: "Scrape", after: "Scrape") -> ServerCounts | None:
        """Counter deltas over an interval in client-comparable terms; None when /metrics is off."""

    def stream_options(self) -> dict:
        """What to ask of the stream: usage at the end at least, per chunk where the engine can."""
        return {"include_usage": True}

    def request_extras(self, output_tokens: int) -> dict:
        """Fields sent through the SDK's extra_body to force the output length."""
        return {"ignore_eos": True, "min_tokens": output_tokens}

    def chat_extras(self, candidate: "Candidate") -> dict[str, Any]:
        """Fields a chat request carries for the candidate's knobs where the engine reads them per request (the
        reasoning switch and effort on vLLM and SGLang); empty where flags set everything."""
        return {}

    @abstractmethod
    def classify_failure(self, log_tail: str, exit_code: int | None) -> Diagnosis:
        """Why the engine did not come up or died, from its log."""

    def error_lines(self, log_text: str) -> list[str]:
        """The lines of an engine log that report errors."""
        return [line.strip() for line in log_text.splitlines() if "error" in line.lower()]

    def health_path(self) -> str:
        return "/health"
