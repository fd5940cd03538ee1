"""Interference probes beside a prefill (measure.kinds.prefill.probes): when they leave, how many at once, how they are recorded,
and that they never count in the prefill cell's figures while its validity and reconciliation still see them."""

import asyncio
import json
import time

import pytest

from servebook.config.plan import Plan, ProbePlan
from servebook.measure.cells import CellSpec
from servebook.measure.kinds import kind_of
from servebook.measure.kinds.prefill.probes import beside, probe_figures
from servebook.measure.observers.reconcile import Check, Reconciliation
from servebook.measure.transport.client import RequestRecord, StreamRequest
from servebook.measure.validity import CellChecks, CellEvidence, cell_faults
from tests.helpers.journals import REPO

SPEC = CellSpec("prefill-2048", "prefill", "prose", 1, 1, 1, 2048)


class FakeEndpoint:
    def extras(self, output_tokens):
        return {"ignore_eos": True}


class FakeWorkloads:
    """What `beside` asks of the run's workloads: prompts, records and requests, no server."""

    tag = "run"
    endpoint = FakeEndpoint()
    openai = None

    #: what answers the probes' streams (the `served` fixture's engine)
    answer = None

    def __init__(self):
        self.openers = iter(range(1000, 2000))
        self.decided: list[float] = []  # when each probe was decided on (its record made)

    async def stream(self, record, request):
        return await FakeWorkloads.answer(record, request)

    async def tokenize(self, text):
        return [7, 8, 9]

    async def filler(self, category):
        return list(range(100))

    async def opener(self):
        return next(self.openers)

    def record(self, spec, request_id, output_tokens, **extra):
        self.decided.append(time.monotonic())
        return RequestRecord(request_id, spec.cell_id, spec.concurrency, spec.category, output_tokens, t_send=0.0,
                             **extra)

    def request(self, output_tokens, **fields):
        return StreamRequest("m", output_tokens, keep_chunk_times=False, **fields)


@pytest.fixture
def served(monkeypatch):
    """Probes answered after `probe_s`, each 4 chunks; records what was in flight when."""
    seen = {"in_flight": 0, "most": 0, "starts": [], "requests": [], "probe_s": 0.05}

    async def fake_stream(record, request):
        seen["in_flight"] += 1
        seen["most"] = max(seen["most"], seen["in_flight"])
        seen["starts"].append(time.monotonic())
        seen["requests"].append(request)
        record.t_send = time.monotonic()
        await asyncio.sleep(0.01)
        record.t_first = time.monotonic()  # decoding from here
        await asyncio.sleep(seen["probe_s"])
        now = time.monotonic()
        record.t_last = now
        record.chunk_times = [now - 0.03, now - 0.02, now - 0.01, now]
        record.prompt_tokens, record.completion_tokens, record.cached_tokens = 64, 4, 0
        seen["in_flight"] -= 1
        return record

    monkeypatch.setattr(FakeWorkloads, "answer", staticmethod(fake_stream))
    return seen


def run_beside(plan: ProbePlan, prefill_s: float, workloads=None):
    records: list[RequestRecord] = []
    ended = {}

    async def prefill():
        ended["sent"] = time.monotonic()
        await asyncio.sleep(prefill_s)
        ended["t"] = time.monotonic()

    async def go():
        await beside(workloads or FakeWorkloads(), SPEC, plan, prefill(), records, batch=0)
        ended["returned"] = time.monotonic()
    asyncio.run(go())
    return records, ended


def test_a_probe_is_decoding_when_the_prefill_leaves_and_more_follow_only_while_it_runs(served):
    plan = ProbePlan(interval_ms=20, output_tokens=4, prompt_tokens=64, max_in_flight=8)
    workloads = FakeWorkloads()
    records, ended = run_beside(plan, prefill_s=0.15, workloads=workloads)
    assert len(records) >= 2 and all(r.probe for r in records)
    assert records[0].t_first <= ended["sent"]  # the first probe had its first token before the prefill left
    decided = workloads.decided
    assert all(t <= ended["t"] for t in decided)
    # after the first, one per 20 ms from the prefill's start, never ahead of that schedule (nor in a burst after
    # the client was held up)
    assert all(t >= ended["sent"] + k * 0.02 - 1e-3 for k, t in enumerate(decided) if k)
    assert ended["returned"] >= max(r.t_last for r in records)
    assert len({r.request_id for r in records}) == len(records)


def test_no_more_in_flight_than_allowed(served):
    served["probe_s"] = 0.2  # a probe outlives many intervals: the cap, not the interval, decides
    plan = ProbePlan(interval_ms=10, output_tokens=4, prompt_tokens=64, max_in_flight=2)
    records, _ = run_beside(plan, prefill_s=0.3)
    assert served["most"] <= 2
    assert len(records) >= 2


def test_each_probe_is_cold_of_its_own_length_and_keeps_its_chunk_times(served):
    plan = ProbePlan(interval_ms=20, output_tokens=4, prompt_tokens=64, max_in_flight=4)
    run_beside(plan, prefill_s=0.1)
    prompts = [r.prompt for r in served["requests"]]
    assert all(len(p) == 64 for p in prompts)
    assert len({p[0] for p in prompts}) == len(prompts)  # each its own first token: nothing cached from another
    assert all(r.keep_chunk_times and r.max_tokens == 4 for r in served["requests"])


def probe_record(i, ttft, gaps):
    first = 1.0 + i
    times = [first]
    for gap in gaps:
        times.append(times[-1] + gap)
    return RequestRecord(f"prefill-2048-probe-{i}", "prefill-2048", 1, "prose", len(times), t_send=first - ttft,
                         t_first=first, t_last=times[-1], prompt_tokens=64, completion_tokens=len(times),
                         cached_tokens=0, chunk_times=times, probe=True)


def test_probe_figures():
    probes = [probe_record(0, 0.5, [0.01, 0.4, 0.01]), probe_record(1, 0.1, [0.01, 0.01, 0.01])]
    f = probe_figures(probes)
    assert f["probe_requests"] == 2
    assert f["probe_ttft_p50_s"] == pytest.approx(0.3)
    assert f["probe_itl_max_s"] == pytest.approx(0.4)  # the stall of a decode held for a prefill chunk
    assert f["probe_itl_p50_s"] == pytest.approx(0.01)
    assert probe_figures([]) == {}


def test_probes_count_in_validity_but_not_in_the_prefill_figures():
    prefill = RequestRecord("prefill-2048-0", "prefill-2048", 1, "prose", 1, t_send=0.0, t_first=0.5, t_last=0.5,
                            prompt_tokens=2048, completion_tokens=1, cached_tokens=0, chunk_times=[0.5])
    probes = [probe_record(0, 0.3, [0.01, 0.2]), probe_record(1, 0.1, [0.01, 0.01])]
    rec = Reconciliation("ok", [Check("generated tokens", 7, 7)])
    evidence = CellEvidence("prefill", "prose", 1, 2048, [prefill, *probes], rec,
                            checks=kind_of("prefill").checks)
    assert cell_faults(evidence) == []  # probes of their own length and prompt size are not wrong ones
    short = probe_record(2, 0.1, [0.01])  # asked 3 tokens, got 2
    short.expected_completion_tokens = 3
    faults = cell_faults(CellEvidence("prefill", "prose", 1, 2048, [prefill, short], rec,
                                      checks=CellChecks(cold_exact_prompts=True)))
    assert [f.code for f in faults] == ["wrong_length"]
    warm = probe_record(3, 0.1, [0.01])
    warm.cached_tokens = 12  # a probe that hit the cache makes the cell's cold evidence doubtful too
    faults = cell_faults(CellEvidence("prefill", "prose", 1, 2048, [prefill, warm], rec,
                                      checks=CellChecks(cold_exact_prompts=True)))
    assert [f.code for f in faults] == ["not_cold"]


def test_recorded_plans_keep_their_ids_with_the_gauge_interval_and_probes_added():
    manifests = sorted((REPO / "tests" / "unit" / "journal" / "recorded_judgements").rglob("manifest.json"))
    plans = [json.loads(m.read_text()) for m in manifests]
    assert plans and all(Plan.model_validate(m["plan"]).id == m["plan_id"] for m in plans)
    off = Plan.model_validate({**plans[0]["plan"], "gauge_interval_ms": 0})
    assert off.id != plans[0]["plan_id"]  # not sampling is another plan, as any other value is


def test_a_plan_without_probes_keeps_its_id():
    plain = Plan()
    assert Plan.model_validate({"prefill": {"prompt_tokens": [512, 2048]}}).id == plain.id
    probed = Plan.model_validate({"prefill": {"prompt_tokens": [512, 2048], "probes": {"interval_ms": 100}}})
    assert probed.id != plain.id and probed.prefill.probes.output_tokens == 32
