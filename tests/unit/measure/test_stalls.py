"""A deployment that stops serving mid-cell (a frozen router, replica or engine) makes the cell invalid with the
`stalled` code; a cell that is merely slow to its first tokens (cold prefill of long prompts) does not."""

from servebook.measure.cells import CellSpec, evidence
from servebook.measure.observers.reconcile import Check, Reconciliation
from servebook.measure.stalls import STALL_FLOOR_S, longest_stall
from servebook.measure.validity import cell_faults, only_disturbed
from tests.helpers.records import request_record

OK = Reconciliation("ok", [Check("generated tokens", 1, 1)])
DECODE = CellSpec("decode-prose-c4", "decode", "prose", 4, 8, 32)
PREFILL = CellSpec("prefill-8192", "prefill", "prose", 2, 4, 4, prompt_tokens=8192)


def stream(i, t_send, ttft, *, tokens=32, step=0.01, frozen=None, replica=None, spec=DECODE):
    """A request whose chunks arrive every `step` after its first token; `frozen` = (from, seconds): nothing
    arrives from `from` for `seconds`, then the stream goes on."""
    times, t = [], t_send + ttft
    for _ in range(tokens):
        if frozen is not None and frozen[0] <= t < frozen[0] + frozen[1]:
            t = frozen[0] + frozen[1]
        times.append(t)
        t += step
    r = request_record(request_id=f"s{i}", cell_id=spec.cell_id, concurrency=spec.concurrency, tokens=tokens,
                       t_send=t_send, t_first=times[0], t_last=times[-1], cached_tokens=0, replica=replica,
                       prompt_tokens=spec.prompt_tokens or 100)
    r.chunk_times = times
    return r


def closed_loop(frozen=None, replicas=None, streams=4, rounds=2):
    """`streams` closed-loop streams of 32 tokens each, `rounds` requests after each other."""
    out = []
    for k in range(streams):
        t = 100.0 + 0.003 * k
        for j in range(rounds):
            replica = None if replicas is None else replicas(k)
            r = stream(k * rounds + j, t, 0.02, frozen=frozen, replica=replica)
            out.append(r)
            t = r.t_last + 0.001
    return out


def faults(spec, records):
    return cell_faults(evidence(spec, records, OK))


def test_a_frozen_deployment_mid_cell_is_a_stall_named_with_its_length_and_when():
    records = closed_loop(frozen=(100.2, 7.0))
    [fault] = [f for f in faults(DECODE, records) if f.code == "stalled"]
    assert "for 7.0 s from 0.2 s into the cell while 4 requests were mid-stream" in fault.text
    assert "limit 3.0 s, the 3 s floor" in fault.text
    assert not only_disturbed(["stalled"]), "a deployment that stops serving is the candidate's fault"
    assert [f.code for f in faults(DECODE, closed_loop())] == [], "the same cell unfrozen is valid"


def test_a_pause_below_the_floor_is_not_a_stall():
    assert "stalled" not in [f.code for f in faults(DECODE, closed_loop(frozen=(100.2, 0.8 * STALL_FLOOR_S)))]


def test_a_frozen_replica_is_named_while_the_other_serves_on():
    """Without a router the records say which replica served each request: replica 0's streams go silent for 6 s
    while replica 1's keep arriving, so the cell as a whole never is."""
    frozen = [stream(k, 100.0, 0.02, frozen=(100.1, 6.0), replica=0) for k in range(2)]
    serving = [stream(10 + k * 30 + j, 100.0 + j * 0.33, 0.02, replica=1) for k in range(2) for j in range(30)]
    records = frozen + serving
    [fault] = [f for f in faults(DECODE, records) if f.code == "stalled"]
    assert "no stream of replica 0 received anything for 6.0 s" in fault.text
    assert longest_stall([r for r in records if r.replica == 1]).gap_s < 1.0


def test_long_first_tokens_of_a_prefill_heavy_cell_are_no_stall():
    """Cold prefills of 8K-token prompts on a small host: each first token takes 6 s, nothing arrives meanwhile.
    While every request waits for its first token no stream is mid-stream; where one decodes beside another's
    prompt (an engine without chunked prefill reads it whole, 5 s of silence), the limit is 5x the cell's median
    TTFT."""
    alone = [stream(i, 100.0 + 6.2 * i, 6.0, tokens=4, spec=PREFILL) for i in range(4)]
    assert "stalled" not in [f.code for f in faults(PREFILL, alone)]
    # two streams: the first decodes its last tokens, silent for 5 s while the second's prompt is read whole
    beside = []
    for i in range(4):
        first = stream(2 * i, 100.0 + 12 * i, 6.0, tokens=4, spec=PREFILL)
        first.chunk_times = [*first.chunk_times[:2], first.chunk_times[2] + 5.0, first.chunk_times[3] + 5.0]
        first.t_last = first.chunk_times[-1]
        second = stream(2 * i + 1, first.chunk_times[1], 5.0, tokens=4, spec=PREFILL)
        beside += [first, second]
    assert longest_stall(beside).gap_s > STALL_FLOOR_S, "the decode stream was silent longer than the floor"
    assert "stalled" not in [f.code for f in faults(PREFILL, beside)]


def test_streams_whose_chunks_are_not_kept_are_not_judged():
    """plan.record_chunks off: a request's first and last arrival alone cannot tell a long decode from a stall."""
    records = closed_loop(frozen=(100.2, 7.0))
    for r in records:
        r.chunk_times = []
    assert longest_stall(records) is None
    assert "stalled" not in [f.code for f in faults(DECODE, records)]


def test_a_stall_beside_the_hosts_own_load_is_the_hosts_and_a_burst_after_it_is_not():
    assert only_disturbed(["stalled", "host_busy"]) and only_disturbed(["client_lag", "stalled"])
    assert not only_disturbed(["stalled", "client_stall"]), "a router that resumes sends a burst"
    assert not only_disturbed(["stalled", "host_busy", "wrong_length"])
