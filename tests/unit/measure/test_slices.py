"""A decode cell measured in slices (a resident round's seats taking turns slice by slice): its requests split
evenly, its time counted slice by slice, the GPU read only while it ran."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from servebook.config.plan import DecodePlan, Plan
from servebook.measure.figures.stats import slice_windows, steady_state, wall_of
from servebook.measure.kinds import decode as decode_kind
from servebook.measure.kinds import kind_of
from servebook.measure.observers.gpu import GpuSample, summarize_gpu
from tests.helpers.records import request_record


@pytest.mark.parametrize("slices, rounds", [(3, 6), (2, 3), (4, 2)])
def test_slices_are_even_and_divide_the_rounds(slices, rounds):
    with pytest.raises(ValidationError, match="slices"):
        DecodePlan(slices=slices, rounds=rounds)


def test_a_plan_with_slices_gives_its_decode_cells_their_slices():
    plan = Plan.model_validate({"decode": {"concurrency": [1, 4], "rounds": 4, "slices": 2}, "prefill": None})
    assert {spec.slices for spec in kind_of("decode").cells(plan)} == {2}


def two_slices(offset: float = 10.0):
    """Two requests at once in each of two slices, the second slice `offset` s after the first."""
    return [request_record(i, concurrency=2, tokens=11, t_send=start, t_first=start + 0.1, t_last=start + 1.1,
                           slice_index=index)
            for index, start in ((0, 0.0), (1, offset)) for i in range(2 * index, 2 * index + 2)]


def test_a_sliced_cells_wall_time_is_its_slices_not_the_gap_between_them():
    records = two_slices()
    assert wall_of(records) == pytest.approx(2.2)
    assert slice_windows(records) == [(0.0, pytest.approx(1.1)), (10.0, pytest.approx(11.1))]
    assert wall_of([request_record(i, t_send=0.0, t_last=3.0) for i in range(2)]) == pytest.approx(3.0)


def test_the_steady_state_of_a_sliced_cell_adds_up_its_slices():
    sliced, alone = steady_state(two_slices(), 2), steady_state(two_slices()[:2], 2)
    assert sliced["steady_s"] == pytest.approx(2 * alone["steady_s"])
    assert sliced["steady_tok_s"] == pytest.approx(alone["steady_tok_s"])


def test_gpu_figures_of_a_sliced_cell_count_only_its_own_windows():
    def sample(t: float, watts: float) -> GpuSample:
        return GpuSample(t, 0, 1980.0, 3201.0, watts, 700.0, 40.0, 50.0, 1000.0, 0, [7])

    # between the slices another seat's engine drew 600 W
    samples = [sample(0.0, 200), sample(1.0, 200), sample(5.0, 600), sample(10.0, 200), sample(11.0, 200)]
    summary = summarize_gpu(samples, {7}, completion_tokens=40, wall_s=2.0, windows=[(0.0, 1.1), (10.0, 11.1)])
    assert summary["gpu_energy_j"] == pytest.approx(400.0) and summary["gpu_power_w"] == pytest.approx(200.0)
    assert summarize_gpu(samples, {7}, 40, 11.0)["gpu_power_w"] > 300  # unwindowed, the other seat is counted


class RecordingWorkloads:
    """What Decode.send uses of Workloads, the requests answered at once; handovers are written down."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []
        self.endpoint = type("E", (), {"extras": staticmethod(lambda n: {})})()
        self.openai = None

    async def stream(self, record, request):
        await asyncio.sleep(0)
        return record

    async def handover(self, index: int) -> None:
        self.events.append(("handover", index))

    def record(self, spec, request_id, output_tokens, **extra):
        record = request_record(request_id=request_id, cell_id=spec.cell_id, tokens=output_tokens, **extra)
        self.events.append(("request", record.slice_index))
        return record


def test_decode_sends_each_slice_at_the_cells_concurrency_and_hands_the_turn_on_between(monkeypatch):
    async def prompt(workloads, spec, i, extras, record):
        return None

    monkeypatch.setattr(decode_kind, "_request", prompt)
    plan = Plan.model_validate({"decode": {"concurrency": [2], "rounds": 4, "slices": 2, "categories": ["prose"]},
                                "prefill": None})
    spec = kind_of("decode").cells(plan)[0]
    workloads = RecordingWorkloads()
    records = asyncio.run(kind_of("decode").send(workloads, spec, lambda: None))  # type: ignore[arg-type]
    assert len(records) == 8 and [r.slice_index for r in records] == [0] * 4 + [1] * 4
    assert workloads.events == [("request", 0)] * 4 + [("handover", 1)] + [("request", 1)] * 4
