"""Whether a cell's figures mean what they say: every fault as a code, with text beside it for readers.

Decisions (a disturbed cell left out of a verdict, a cell that rejects) read the codes; the text is
prose and may be reworded freely. `cell_faults` is the one place where validity is decided, as a
pure function of what the cell measured.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from .observers.reconcile import Reconciliation, server_cached_tokens
from .stalls import longest_stall, stall_limit
from .transport.client import RequestRecord

InvalidCode = Literal[
    "requests_failed",      # some requests of the cell errored
    "wrong_length",         # output length not what was forced
    "wrong_prompt_length",  # a prefill prompt not of the asked length
    "cold_not_verified",    # a cold prefill cell without evidence of being cold
    "not_cold",             # a cold prefill cell that hit the cache
    "shared_prefix",        # prompts meant to share nothing hit the cache
    "counters_disagree",    # the engine's counters and the client's usage differ
    "compilation",          # the engine compiled inside the measured interval
    "host_busy",            # other processes used the host's CPU during the cell
    "seats_contend",        # a resident round's other engines, held to this engine's CPUs, kept them busy
    "gpu_busy",             # other processes ran on the engine's GPU during the cell
    "client_stall",         # tokens reached the client in a burst after a stall, faster than the engine made them
    "ttft_below_engine",    # a first token earlier than the engine's own prompt time allows
    "client_lag",           # an open-loop client sent requests late: its pace, not the engine's
    "stalled",              # nothing reached any stream for seconds while requests were mid-stream (measure.stalls)
    "context_overflow",     # more than 1% of an agents cell's turns did not fit the engine's context
    "tool_call_unparsed",   # more than 1% of the tool calls an agents cell asked the engine for did not parse
    "outlier_run",          # set by the verdict, never at measurement: the whole run sat apart from its siblings
                            # with its disturbance figures standing out (verdicts.outliers)
    "unclassified",         # a fault from a journal written before codes, whose text names no known fault
]
INVALID_CODES: tuple[str, ...] = get_args(InvalidCode)

#: Faults of the host or of the measuring client, not of the candidate: such a cell is evidence lost, never a reason
#: to reject.
DISTURBANCES: frozenset[str] = frozenset({"host_busy", "seats_contend", "gpu_busy", "client_stall",
                                          "ttft_below_engine", "client_lag", "outlier_run"})
#: A stall (`stalled`) is the deployment's: a router, a replica or an engine that stopped serving, so it counts
#: against the candidate. Only evidence that something else held the machine or the client in the same cell (other
#: processes' CPU or GPU, the client behind its own schedule) makes it the host's: then it is measured again like any
#: disturbance. A burst after it (client_stall) is no such evidence: a router that resumes sends what the replicas
#: made meanwhile in a burst.
_STALL_EXCUSES: frozenset[str] = frozenset({"host_busy", "seats_contend", "gpu_busy", "client_lag"})

#: Each disturbance in a few words, for a count of the cells it left out ("host busy 4, client stalled 2").
DISTURBANCE_WORDS: dict[str, str] = {
    "host_busy": "host busy", "seats_contend": "other engines on its CPUs", "gpu_busy": "GPU busy",
    "client_stall": "client stalled", "ttft_below_engine": "first token before the engine's prompt time",
    "client_lag": "client behind its schedule", "outlier_run": "outlier run", "unclassified": "unclassified"}

#: How each code reads; the only place the wording lives (a test rewords them all and checks verdicts hold).
MESSAGES: dict[str, str] = {
    "requests_failed": "{failed} of {total} requests failed ({first_error})",
    "wrong_length": "{count} requests returned {got} tokens instead of {expected}",
    "wrong_prompt_length": "{count} prompts were {got} tokens instead of {expected}",
    "cold_not_verified": "cold not verified: {why}",
    "not_cold": "not cold: {why}",
    "shared_prefix": "prompts shared a prefix: {count} requests hit the prompt cache (up to {cached} cached tokens)",
    "counters_disagree": "counters disagree: {detail}",
    "compilation": "compilation inside the measured interval: {line}",
    "host_busy": "host busy: other processes used {cores:.2f} CPU cores during the cell (limit {limit:.2f}: "
                 "{basis})",
    "seats_contend": "the round's other engines kept {cores:.2f} CPU cores busy on the CPUs this engine is held to "
                     "(limit {limit:g}): held to the same CPUs, they took them from it",
    "gpu_busy": "gpu busy: other processes ({pids}) on the engine's GPU during the cell",
    "client_stall": "client stalled: {count} of {total} requests read tokens faster than {bound} ({worst})",
    "stalled": "no stream{of_replica} received anything for {gap:.1f} s from {at:.1f} s into the cell while {streams} "
               "requests were mid-stream (limit {limit:.1f} s, {basis}): the deployment stopped serving",
    "client_lag": "the client sent {count} of {total} requests more than {limit:g} ms after they were due (worst "
                  "{worst:.0f} ms): it fell behind its schedule, so the load was not the one asked for",
    "context_overflow": "{count} of {total} turns did not fit the engine's context of {context} tokens per request "
                        "(their sessions ended there): the plan's sessions outgrow this candidate",
    "tool_call_unparsed": "{count} of {total} turns that asked for a tool call got none that parses (a tool named "
                          "among the request's, arguments a JSON object)",
    "outlier_run": "an outlier among its candidate's runs: {detail}",
    "ttft_below_engine": "{count} first tokens came before the engine's own prompt time allows ({worst}): a clock "
                         "or a timing is wrong",
}

#: A request read faster than this many times the engine's own decode rate for it was not read as it was made:
#: the client held the tokens back, then read a burst. The engine's rate (llama.cpp's timings) spans the same
#: tokens and its first token's sampling, which is short except under a grammar: structured cells are not judged
#: (JSON read 1.8x faster than llama.cpp's own rate, with no stall). Engines that report no per-request timing are
#: not judged either: against the cell's aggregate, a request with a long prompt and a short output reads many
#: times faster with no stall at all.
_STALL_FACTOR = 2.0

#: How journals written before codes began their reasons (read back only, never written).
_LEGACY_PREFIXES: tuple[tuple[str, InvalidCode], ...] = (
    ("host busy:", "host_busy"), ("gpu busy:", "gpu_busy"), ("cold not verified:", "cold_not_verified"),
    ("not cold:", "not_cold"), ("prompts shared a prefix", "shared_prefix"), ("counters disagree", "counters_disagree"),
    ("compilation inside", "compilation"),
)
_LEGACY_PHRASES: tuple[tuple[str, InvalidCode], ...] = (
    (" requests failed (", "requests_failed"), (" requests returned ", "wrong_length"),
    (" prompts were ", "wrong_prompt_length"),
)


@dataclass(frozen=True)
class InvalidReason:
    code: InvalidCode
    text: str

    @classmethod
    def of(cls, code: InvalidCode, **values: object) -> "InvalidReason":
        return cls(code, MESSAGES[code].format(**values))


@dataclass(frozen=True)
class CellChecks:
    """Which of the checks that depend on what a cell asks apply to a kind's cells (each kind says, in its module
    under measure/kinds/); the rest apply to every cell."""

    #: each request's own drawn length is forced (open-loop cells), not the cell's one output length
    per_request_lengths: bool = False
    #: prompts of exactly the cell's prompt length, read cold (no cache hit), verified by the counters
    cold_exact_prompts: bool = False
    #: with an exact prompt length, the prompts share no prefix: a cache hit means they did
    unshared_prompts: bool = False
    #: agent turns (measure.kinds.agents.sessions): a turn that overflowed the context is counted apart from
    #: failures and lengths, a turn that asked for a tool call has its length capped, not forced, and more than
    #: TURN_FAULT_SHARE of turns overflowing, or of asked calls not parsing, make the cell invalid
    session_turns: bool = False


@dataclass(frozen=True)
class CellEvidence:
    """What validity is decided from: the cell as asked, its requests, the counters, and the host around it."""

    kind: str
    category: str
    output_tokens: int
    prompt_tokens: int | None
    records: Sequence[RequestRecord]
    reconciliation: Reconciliation
    compilations: Sequence[str] = ()
    #: CPU cores other processes used during the cell (None: not checked, e.g. attached engines)
    foreign_cpu_cores: float | None = None
    foreign_cpu_limit: float = 0.5
    #: why the limit is what it is (measure.observers.host.ForeignLimit), for the reason's text
    foreign_limit_basis: str = "the default"
    #: CPU cores a resident round's other engines used on the CPUs this engine is held to, while it measured (None:
    #: no other seats); held to the foreign limit
    contending_cpu_cores: float | None = None
    #: processes on the engine's GPU that are not the engine's ("" or None: none seen or not checked)
    gpu_foreign_pids: str | None = None
    concurrency: int = 1
    #: open-loop cells: how late after its due time a request may leave
    max_lag_ms: float | None = None
    #: the checks the cell's kind asks for
    checks: CellChecks = CellChecks()
    #: agent turns: the engine's context per request, when known (measure.kinds.agents.sessions decides overflows with it)
    context_tokens: int | None = None


def cell_faults(evidence: CellEvidence) -> list[InvalidReason]:
    """Every fault of a cell, in a fixed order; an empty list means the cell is valid."""
    return [*_request_faults(evidence), *_session_faults(evidence), *_cache_faults(evidence),
            *_engine_faults(evidence), *_stall_faults(evidence), *_plausibility_faults(evidence)]


#: the share of an agents cell's turns that may overflow the context, or of its asked tool calls that may not parse
TURN_FAULT_SHARE = 0.01


def _session_faults(e: CellEvidence) -> list[InvalidReason]:
    if not e.checks.session_turns or not e.records:
        return []
    out: list[InvalidReason] = []
    over = [r for r in e.records if r.context_overflow]
    if len(over) > TURN_FAULT_SHARE * len(e.records):
        out.append(InvalidReason.of("context_overflow", count=len(over), total=len(e.records),
                                    context=e.context_tokens if e.context_tokens is not None else "?"))
    asked = [r for r in e.records if r.tool_call_parsed is not None]
    unparsed = [r for r in asked if not r.tool_call_parsed]
    if len(unparsed) > TURN_FAULT_SHARE * len(asked):
        out.append(InvalidReason.of("tool_call_unparsed", count=len(unparsed), total=len(asked)))
    return out


def _request_faults(e: CellEvidence) -> list[InvalidReason]:
    # an agent turn that overflowed is counted as such (_session_faults), whatever the engine made of it
    records = [r for r in e.records if not r.context_overflow] if e.checks.session_turns else e.records
    ok = [r for r in records if r.ok]
    errors = [r for r in records if not r.ok]
    out: list[InvalidReason] = []
    if errors:
        out.append(InvalidReason.of("requests_failed", failed=len(errors), total=len(records),
                                    first_error=errors[0].error))
    if e.category == "structured":
        # A grammar decides when the JSON ends, so the length is capped, not forced.
        wrong = [r for r in ok if not 1 <= (r.completion_tokens or 0) <= e.output_tokens]
    elif e.checks.session_turns:
        # a turn that asked for a tool call ends with the call: its length is capped, not forced
        wrong = [r for r in ok if not (1 <= (r.completion_tokens or 0) <= r.expected_completion_tokens
                                       if r.tool_call_parsed is not None
                                       else r.completion_tokens == r.expected_completion_tokens)]
    else:
        wrong = [r for r in ok if r.completion_tokens != _asked_length(e, r)]
    if wrong:
        expected = sorted({_asked_length(e, r) for r in wrong})
        out.append(InvalidReason.of("wrong_length", count=len(wrong), expected=expected[0] if len(expected) == 1
                                    else "their forced lengths", got=sorted({r.completion_tokens or 0 for r in wrong})))
    if e.checks.cold_exact_prompts:
        short = [r for r in ok if not r.probe and r.prompt_tokens != e.prompt_tokens]
        if short:
            out.append(InvalidReason.of("wrong_prompt_length", count=len(short), expected=e.prompt_tokens,
                                        got=sorted({r.prompt_tokens or 0 for r in short})))
    return out


def _asked_length(e: CellEvidence, r: RequestRecord) -> int:
    """The output length a request was forced to: its own where lengths are drawn per request, it is an agent's turn
    or an interference probe (plan.prefill.probes), else the cell's."""
    per_request = e.checks.per_request_lengths or e.checks.session_turns
    return r.expected_completion_tokens if per_request or r.probe else e.output_tokens


def _cache_faults(e: CellEvidence) -> list[InvalidReason]:
    ok = [r for r in e.records if r.ok]
    if e.checks.cold_exact_prompts:
        cold, why = cold_evidence(ok, e.reconciliation)
        if cold is None:
            return [InvalidReason.of("cold_not_verified", why=why)]
        return [] if cold else [InvalidReason.of("not_cold", why=why)]
    if e.checks.unshared_prompts and e.prompt_tokens is not None and e.category != "structured":
        # The plan asked for prompts that share no prefix: a cache hit means they did, unless it stayed within
        # the opening that makes a token prompt unique (a radix cache matches a lone opener token that a prompt of
        # an earlier run on the same server began with; SGLang did, 1 token of a 512-token prompt).
        shared = [r for r in ok if r.cached_tokens and r.cached_tokens >= (r.opening_tokens or 1)]
        if shared:
            return [InvalidReason.of("shared_prefix", count=len(shared),
                                     cached=max(r.cached_tokens or 0 for r in shared))]
    return []


def _engine_faults(e: CellEvidence) -> list[InvalidReason]:
    out: list[InvalidReason] = []
    if e.reconciliation.status == "mismatch":
        out.append(InvalidReason.of("counters_disagree", detail=e.reconciliation.message))
    if e.compilations:
        out.append(InvalidReason.of("compilation", line=e.compilations[0]))
    if e.foreign_cpu_cores is not None and e.foreign_cpu_cores > e.foreign_cpu_limit:
        out.append(InvalidReason.of("host_busy", cores=e.foreign_cpu_cores, limit=e.foreign_cpu_limit,
                                    basis=e.foreign_limit_basis))
    if e.contending_cpu_cores is not None and e.contending_cpu_cores > e.foreign_cpu_limit:
        out.append(InvalidReason.of("seats_contend", cores=e.contending_cpu_cores, limit=e.foreign_cpu_limit))
    if e.gpu_foreign_pids:
        out.append(InvalidReason.of("gpu_busy", pids=e.gpu_foreign_pids))
    return out


def _stall_faults(e: CellEvidence) -> list[InvalidReason]:
    """The cell's longest silence while requests were mid-stream, beyond what its own pace allows (measure.stalls)."""
    stall = longest_stall(e.records)
    limit = stall_limit(e.records)
    if stall is None or stall.gap_s <= limit.seconds:
        return []
    of_replica = "" if stall.replica is None else f" of replica {stall.replica}"
    return [InvalidReason.of("stalled", of_replica=of_replica, gap=stall.gap_s, at=stall.at_s, streams=stall.streams,
                             limit=limit.seconds, basis=limit.basis)]


def _plausibility_faults(e: CellEvidence) -> list[InvalidReason]:
    """Figures no engine could have produced: a request read faster than the engine made its tokens (the client
    stalled, then read a burst), or a first token before the engine's own prompt time was over."""
    ok = [r for r in e.records if r.ok]
    out: list[InvalidReason] = []
    stalled = [(r.decode_rate / r.server_predicted_per_second, r) for r in stalled_requests(ok, e.category)
               if r.decode_rate and r.server_predicted_per_second]
    if stalled:
        _, worst = max(stalled, key=lambda item: item[0])
        bound = f"{_STALL_FACTOR:g}x the engine's own rate ({worst.server_predicted_per_second:.0f} tok/s by its timings)"
        out.append(InvalidReason.of("client_stall", count=len(stalled), total=len(ok), bound=bound,
                                    worst=_burst(worst)))
    lags = [r.t_send - r.t_due for r in e.records if r.t_due is not None]
    late = [lag for lag in lags if e.max_lag_ms is not None and lag > e.max_lag_ms / 1000]
    if len(late) > 0.05 * len(lags):  # a few late sends are the host's blips; more means the client set the pace
        out.append(InvalidReason.of("client_lag", count=len(late), total=len(lags), limit=e.max_lag_ms,
                                    worst=1000 * max(late)))
    early = [(r.server_prompt_ms / 1000 - r.ttft, r) for r in ok
             if r.ttft is not None and r.server_prompt_ms is not None and r.ttft < r.server_prompt_ms / 1000 - 0.002]
    if early:
        _, r = max(early, key=lambda item: item[0])
        out.append(InvalidReason.of("ttft_below_engine", count=len(early),
                                    worst=f"{1000 * (r.ttft or 0):.1f} ms against {r.server_prompt_ms:.1f} ms"))
    return out


def stalled_requests(records: Sequence[RequestRecord], category: str) -> list[RequestRecord]:
    """The requests read more than _STALL_FACTOR times faster than the engine's own rate for them: the tokens were
    held back (by the client, or on the way) and then read in a burst. Structured output is not judged: a grammar
    makes the engine's first token slow, and its own rate with it."""
    if category == "structured":
        return []
    return [r for r in records if r.ok and r.server_predicted_per_second and (rate := r.decode_rate)
            and rate > _STALL_FACTOR * r.server_predicted_per_second]


def _burst(r: RequestRecord) -> str:
    """How the worst request arrived: its tokens' span, and the longest wait before a chunk."""
    span_ms = 1000 * ((r.t_last or 0.0) - (r.t_first or 0.0))
    text = f"{r.completion_tokens} tokens in {span_ms:.0f} ms"
    times = [r.t_send, *r.chunk_times] if r.chunk_times else []
    if len(times) > 1:
        wait = max(b - a for a, b in zip(times, times[1:], strict=False))
        text += f" after a {1000 * wait:.0f} ms wait"
    return text


def cold_evidence(records: Sequence[RequestRecord], reconciliation: Reconciliation) -> tuple[bool | None, str]:
    """Whether a prefill cell ran cold, and on what evidence: the responses' cached-token counts or the engine's
    cache counter. Neither reporting means not verified, never cold by default."""
    warm = [r for r in records if r.cached_tokens and r.cached_tokens >= (r.opening_tokens or 1)]
    if warm:
        return False, f"{len(warm)} requests hit the prompt cache ({max(r.cached_tokens or 0 for r in warm)} " \
                      "cached tokens)"
    # hits within a prompt's opening (RequestRecord.opening_tokens) matched another prompt's opener, no content
    chance = sum(r.cached_tokens or 0 for r in records)
    server = server_cached_tokens(reconciliation)
    if server and server > chance:
        return False, f"the engine's counter says {server:g} prompt tokens came from its cache"
    if records and all(r.cached_tokens is not None for r in records):
        return True, ("every response reported 0 cached tokens" if not chance else
                      f"no response reported cached tokens beyond its unique opening ({chance} tokens of openers)")
    if server == 0:
        return True, "the engine's cache counter did not move"
    return None, "neither the responses' usage nor the engine's counters report cached tokens"


def join_codes(reasons: Iterable[InvalidReason]) -> str:
    return ",".join(r.code for r in reasons)


def join_texts(reasons: Iterable[InvalidReason]) -> str:
    return "; ".join(r.text for r in reasons)


def codes_of(codes: object, texts: object) -> list[str]:
    """A recorded cell's fault codes: its `invalid_codes`, or, for a journal written before codes, read from the
    text (the only place servebook still reads prose, and only prose it wrote itself)."""
    if isinstance(codes, str):
        return [c for c in codes.split(",") if c]
    if not isinstance(texts, str) or not texts.strip():
        return []
    return [_code_of(part) for part in (p.strip() for p in texts.split("; ") if p.strip())]


def _code_of(text: str) -> str:
    """One fault's code from its words: the prefixes and phrases of journals written before codes, else the message
    whose wording it has (a verdict event written before its left-out cells were typed quotes them whole)."""
    found = next((code for prefix, code in _LEGACY_PREFIXES if text.startswith(prefix)), None)
    found = found or next((code for phrase, code in _LEGACY_PHRASES if phrase in text), None)
    return found or next((code for code, message in MESSAGES.items() if _worded(message).fullmatch(text)),
                         "unclassified")


def _worded(message: str) -> re.Pattern[str]:
    """A message as a pattern: its words as they are, each value it names any text."""
    return re.compile("".join(re.escape(words) + (".*?" if name is not None else "")
                              for words, name, _, _ in string.Formatter().parse(message)), re.DOTALL)


def only_disturbed(codes: Sequence[str]) -> bool:
    """A cell whose only faults are other processes' load: evidence lost, not a fault of the candidate (a stall
    beside such load is the host's too, see _STALL_EXCUSES)."""
    if "stalled" in codes and _STALL_EXCUSES & set(codes):
        codes = [code for code in codes if code != "stalled"]
    return bool(codes) and all(code in DISTURBANCES for code in codes)
