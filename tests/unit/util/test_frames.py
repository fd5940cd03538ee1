"""frame_records reads a frame as to_dict("records") does: the same values and types, NaN kept, NA as None."""

import math

import numpy as np
import pandas as pd

from servebook.util.frames import frame_records


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def test_a_mixed_frame_reads_as_to_dict_reads_it():
    frame = pd.DataFrame({
        "f": [1.5, np.nan, 3.0], "i": [1, 2, 3], "b": [True, False, True], "s": ["a", None, "c"],
        "n": pd.array([1, None, 3], dtype="Int64"), "t": pd.to_datetime(["2026-12-07", "2026-12-08", None]),
        "o": [{"k": 1}, [2], None]})
    expected, got = frame.to_dict("records"), frame_records(frame)
    assert len(got) == len(expected) == 3
    for want, row in zip(expected, got, strict=True):
        assert list(row) == list(want)
        mismatched = {k: (want[k], row[k]) for k in want if not (same(want[k], row[k]) or
                                                                 (want[k] is pd.NaT and row[k] is pd.NaT))}
        assert mismatched == {}
    assert frame_records(frame.iloc[0:0]) == []
