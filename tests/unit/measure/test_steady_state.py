from servebook.measure.cells import steady_state
from tests.helpers.records import request_record


def request(i, send, first, last, tokens=11):
    return request_record(i, cell_id="decode-prose-c2", concurrency=2, tokens=tokens, t_send=send, t_first=first,
                          t_last=last, prompt_tokens=10)


def test_window_opens_when_all_streams_run_and_closes_when_one_drains():
    # two streams: A runs 0-10 then 10-20; B starts late at 2 and runs 2-12, then 12-22
    records = [request(0, 0.0, 0.0, 10.0), request(1, 2.0, 2.0, 12.0),
               request(2, 10.0, 10.0, 20.0), request(3, 12.0, 12.0, 22.0)]
    s = steady_state(records, 2)
    assert s["ramp_up_s"] == 2.0 and s["steady_s"] == 18.0 and s["ramp_down_s"] == 2.0
    # each request decodes 10 tokens over 10 s: two streams give 2 tok/s inside the window
    assert abs(s["steady_tok_s"] - 2.0) < 1e-9


def test_no_window_when_concurrency_was_never_reached():
    s = steady_state([request(0, 0.0, 0.1, 1.0)], 2)
    assert s["steady_tok_s"] is None
