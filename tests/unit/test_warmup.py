import asyncio

import pytest
from pydantic import ValidationError

from servebook.config import Plan
from servebook.measure.transport.client import RequestRecord
from servebook.measure.warmup import burst_rate, is_steady, warm_until_steady
from tests.helpers.records import request_record


def _record(t_send: float, t_last: float, tokens: int | None = 32, error: str | None = None) -> RequestRecord:
    record = request_record(request_id="r", cell_id="warmup", tokens=32, t_send=t_send, t_last=t_last, error=error,
                            prompt_tokens=None)
    record.completion_tokens = tokens  # these tests set the tokens and the error independently
    return record


def test_burst_rate_spans_first_send_to_last_token():
    assert burst_rate([_record(0.0, 1.0), _record(0.5, 2.0)]) == pytest.approx(64 / 2.0)


def test_a_failed_request_gives_no_rate():
    assert burst_rate([_record(0.0, 1.0), _record(0.0, 1.0, error="boom")]) is None
    assert burst_rate([]) is None


@pytest.mark.parametrize("rates, steady", [([100], False), ([80, 100], False), ([100, 102], True),
                                           ([102, 100], True), ([60, 100, 102], True), ([100, 110], False)])
def test_steady_when_the_last_two_agree(rates, steady):
    assert is_steady(rates, 3.0) is steady


def _bursts(rates: list[float]):
    async def burst(index: int) -> list[RequestRecord]:
        return [_record(0.0, 32 / rates[index])]
    return burst


def test_warms_until_two_bursts_agree():
    trace = asyncio.run(warm_until_steady(_bursts([50, 80, 95, 97, 97]), 4, within_pct=3, max_bursts=10))
    assert trace.steady and [round(r) for r in trace.rates] == [50, 80, 95, 97]
    assert "steady after 4 bursts" in trace.describe()


def test_gives_up_after_max_bursts_and_says_so():
    trace = asyncio.run(warm_until_steady(_bursts([50, 60, 70, 80]), 4, within_pct=3, max_bursts=4))
    assert not trace.steady and len(trace.rates) == 4
    assert "not steady" in trace.describe()


def test_the_plan_names_a_misspelt_warmup_field():
    with pytest.raises(ValidationError, match="within_pc"):
        Plan.model_validate({"warmup_until_steady": {"within_pc": 2}})
    assert Plan.model_validate({"warmup_until_steady": {}}).warmup_until_steady is not None
