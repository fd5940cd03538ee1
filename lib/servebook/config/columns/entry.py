"""What the catalogue says of one column of cells.parquet (config.columns): data, and the few shapes it comes in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: the column's values as a row holds them (None where a cell has none)
Dtype = Literal["int", "float", "str", "bool"]


@dataclass(frozen=True)
class CellColumn:
    """One column: its type and unit, how a table titles and formats it, what it means, and who writes it."""

    name: str
    dtype: Dtype
    #: the unit its values are recorded in ("" where none: counts of a kind are in their title, shares are 0-1)
    unit: str
    #: its heading in a table of cells
    title: str
    #: one sentence: what the figure is, as measured
    definition: str
    #: the cell kinds (measure/kinds/) or observers (config.columns.OBSERVERS) that write it
    written_by: tuple[str, ...]
    #: how it is shown: a number format (with `scale` and `suffix`), "int" (a count), "text" (as recorded)
    format: str = ".1f"
    scale: float = 1.0
    suffix: str = ""
    #: how it reads inside a sentence (a verdict's reason, a side effect); "" where only its title is used
    phrase: str = ""

    @property
    def words(self) -> str:
        return self.phrase or self.title


def seconds(name: str, title: str, definition: str, *by: str, phrase: str = "") -> CellColumn:
    """A time in seconds, shown in whole milliseconds."""
    return CellColumn(name, "float", "s", title, definition, by, ".0f", 1000.0, " ms", phrase)


def millis(name: str, title: str, definition: str, *by: str, phrase: str = "") -> CellColumn:
    """A time recorded in milliseconds, shown as it is."""
    return CellColumn(name, "float", "ms", title, definition, by, ".0f", 1.0, " ms", phrase)


def count(name: str, title: str, definition: str, *by: str, dtype: Dtype = "int", unit: str = "") -> CellColumn:
    """A count, shown whole."""
    return CellColumn(name, dtype, unit, title, definition, by, "int")


def share(name: str, title: str, definition: str, *by: str, phrase: str = "", fmt: str = ".0%") -> CellColumn:
    """A share between 0 and 1, shown in percent."""
    return CellColumn(name, "float", "", title, definition, by, fmt, phrase=phrase)


def text(name: str, title: str, definition: str, *by: str, dtype: Dtype = "str") -> CellColumn:
    """Words (or a flag) as recorded."""
    return CellColumn(name, dtype, "", title, definition, by, "text")


def percent(name: str, title: str, definition: str, *by: str, phrase: str = "") -> CellColumn:
    """A share between 0 and 1, shown as a whole number and a percent sign apart ("42 %")."""
    return CellColumn(name, "float", "", title, definition, by, ".0f", 100.0, " %", phrase)
