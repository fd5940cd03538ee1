"""A trace servebook cannot replay is one line naming the file and the line, before anything is launched
(issue 56, item 7): stamps that are not finite or run for hours, lines that are not objects, bytes that are not
UTF-8, a URL no fsspec protocol reads; and an open-loop load's trace is read before launch too."""

import pytest

from servebook.config import Plan
from servebook.config.errors import InputError
from servebook.config.load import ReplayPlan
from servebook.config.traces import LONGEST_REPLAY_S, longest_replayed, read_rows
from servebook.engines import get_engine
from tests.helpers.candidates import make_candidate

GOOD = '{"timestamp": 0, "input_length": 100, "output_length": 10}\n'


def trace(tmp_path, text: str | bytes):
    path = tmp_path / "trace.jsonl"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


@pytest.mark.parametrize("line, words", [
    ('{"timestamp": Infinity, "input_length": 100, "output_length": 10}', "is not a finite number"),
    ('{"timestamp": NaN, "input_length": 100, "output_length": 10}', "is not a finite number"),
    ('[1, 2, 3]', "the line is a JSON list, not an object"),
    ('"just text"', "the line is a JSON str, not an object"),
])
def test_a_line_servebook_cannot_replay_is_named_with_its_number(tmp_path, line, words):
    path = trace(tmp_path, GOOD + line + "\n")
    with pytest.raises(InputError, match=rf"trace.jsonl:2: .*{words}"):
        read_rows(path)


def test_bytes_that_are_not_utf8_and_a_url_nothing_reads_are_one_line(tmp_path):
    with pytest.raises(InputError, match="not UTF-8 text"):
        read_rows(trace(tmp_path, GOOD.encode() + b"\xff\xfe{}\n"))
    with pytest.raises(InputError, match="nosuchproto://x/t.jsonl: cannot open that URL"):
        read_rows("nosuchproto://x/t.jsonl")


def test_a_replay_whose_stamps_run_past_an_hour_must_bound_itself(tmp_path):
    # seconds written where milliseconds belong, or another clock's stamps: years of waiting before the last request
    far = GOOD + '{"timestamp": 31536000000, "input_length": 100, "output_length": 10}\n'
    path = trace(tmp_path, far)
    with pytest.raises(InputError, match=f"past the {LONGEST_REPLAY_S:g} s a replay may take; set replay.max_duration_s"):
        longest_replayed(ReplayPlan(trace=path))
    assert longest_replayed(ReplayPlan(trace=path, max_duration_s=60)) == 110  # bounded: the far request is cut


def test_the_load_trace_is_read_before_launch_even_without_a_context_to_check(tmp_path):
    plan = Plan.model_validate({"decode": None, "prefill": None,
                                "load": {"rates_rps": [1], "trace": trace(tmp_path, GOOD + "not json\n")}})
    candidate = make_candidate("openai", model={"id": "m"}, launch={"mode": "attach", "url": "http://127.0.0.1:9"})
    with pytest.raises(InputError, match="trace.jsonl:2"):
        get_engine("openai").check_plan_fits(candidate, plan)
