"""Request records as the client would have written them, for the measurement's pure functions."""

from servebook.measure.transport.client import RequestRecord


def request_record(i: object = 0, *, request_id: str | None = None, cell_id: str = "cell", concurrency: int = 1, category: str = "prose",
                   tokens: int = 10, completion: int | None = None, t_send: float = 0.0, t_first: float | None = None,
                   t_last: float | None = None, prompt_tokens: int | None = 100, cached_tokens: int | None = None,
                   error: str | None = None, **fields) -> RequestRecord:
    """Request `r{i}` (or `request_id`), asked for `tokens` completion tokens and given `completion` (default: as asked; none when it
    failed with `error`); `fields` sets any other column (t_due, turn, server timings, ...)."""
    given = None if error else (tokens if completion is None else completion)
    return RequestRecord(request_id or f"r{i}", cell_id, concurrency, category, tokens, t_send=t_send, t_first=t_first,
                         t_last=t_last, prompt_tokens=prompt_tokens, completion_tokens=given,
                         cached_tokens=cached_tokens, error=error, **fields)
