"""pandas frames as plain rows, fast: what the site and the tables read cells as."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def frame_records(frame: "pd.DataFrame") -> list[dict[str, Any]]:
    """`frame.to_dict("records")`, the same values (Python scalars, NaN kept, a nullable column's NA as None) in
    a twentieth of the time: to_dict reads a wide frame column by column through `.iloc`, 8 ms for 8 rows of 120
    columns, which a site build paid for every table of every study page."""
    import pandas as pd

    if frame.empty:
        return []
    columns = list(frame.columns)
    rows = frame.to_numpy(dtype=object).tolist()
    if any(isinstance(dtype, pd.api.extensions.ExtensionDtype) for dtype in frame.dtypes):
        missing = pd.NA
        rows = [[None if value is missing else value for value in row] for row in rows]
    return [dict(zip(columns, row, strict=True)) for row in rows]
