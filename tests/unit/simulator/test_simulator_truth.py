"""The simulator's scheduling replayed in virtual time: the truth capacity benchmarks are scored against."""

from servebook.simulator.config import TimingModel
from servebook.simulator.truth import open_loop_latencies


def test_a_lone_request_waits_for_its_prefill_and_then_one_step_per_token():
    timing = TimingModel(slots=1)
    prefill = 1000 / timing.prefill_tok_s + timing.chunk_overhead_s
    [(ttft, tpot)] = open_loop_latencies(timing, [(0.0, 1000, 9)])
    assert abs(ttft - prefill) < 1e-12 and abs(tpot - timing.step_seconds(1)) < 1e-12


def test_a_request_beyond_the_slots_queues_for_the_whole_service_of_the_one_before_it():
    timing = TimingModel(slots=1, slowdown=2.0)
    [(first, _), (second, tpot)] = open_loop_latencies(timing, [(0.0, 512, 5), (0.0, 512, 5)])
    service = first + 4 * timing.step_seconds(1, 2.0)
    assert abs(second - (service + first)) < 1e-12 and abs(tpot - timing.step_seconds(1, 2.0)) < 1e-12


def test_steps_lengthen_with_the_sequences_running_beside_them():
    timing = TimingModel(slots=8)
    alone = open_loop_latencies(timing, [(0.0, 64, 17)])[0][1]
    crowded = open_loop_latencies(timing, [(0.0, 64, 17)] * 8)[0][1]
    assert abs(crowded / alone - timing.step_seconds(8) / timing.step_seconds(1)) < 1e-9
