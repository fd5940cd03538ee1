"""One rendering path for everything a user displays: a few neutral blocks, drawn three ways.

A displayable object builds `blocks()` once (headings, text, tables); `Renderable` turns them
into a rich renderable for the terminal, HTML for Jupyter (`_repr_mimebundle_`) and plain text
for papermill logs and `str()`. The site's templates draw the same `Table` objects, so a figure
is formatted in exactly one place.
"""

from __future__ import annotations

import html
import io
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Union

#: how a row or a text is marked; any other name would print unstyled, so mypy refuses it
Style = Literal["", "accepted", "invalid", "warn", "dim", "heading"]
#: row / text styles -> (rich style, CSS class of the site and of notebook HTML)
STYLES: dict[Style, tuple[str, str]] = {
    "": ("", ""),
    "accepted": ("green", "accepted"),
    "invalid": ("bold red", "invalid"),
    "warn": ("yellow", "warn"),
    "dim": ("dim", "muted"),
    "heading": ("bold", ""),
}
_HTML_COLORS = {"accepted": "#1f7a4d", "invalid": "#b42318", "warn": "#9a6700", "dim": "#6b7280"}
_HTML_ROW_BACKGROUND = {"accepted": "#ecfdf3", "invalid": "#fef3f2"}


@dataclass
class Row:
    values: list[Any]
    css: Style = ""
    #: a style per value, where one cell of the row reads apart from the others (a change within the noise, dim)
    styles: list[Style] | None = None

    def style_of(self, i: int) -> Style:
        return self.styles[i] if self.styles and i < len(self.styles) else ""


@dataclass
class Table:
    """Column names and rows of already formatted values; `css` of a row is one of STYLES."""

    columns: list[str]
    rows: list[Row] = field(default_factory=list)
    title: str = ""

    def add(self, values: list[Any], css: Style = "", styles: list[Style] | None = None) -> None:
        self.rows.append(Row(list(values), css, styles))

    @classmethod
    def from_frame(cls, frame, title: str = "", index: str | None = None) -> "Table":
        """A pandas frame as a table; `index` names a column made of the frame's index."""
        columns = ([index] if index is not None else []) + [str(c) for c in frame.columns]
        table = cls(columns, title=title)
        for key, row in frame.iterrows():
            values = ["-" if _missing(v) else v for v in row.values]
            table.add(([key] if index is not None else []) + values)
        return table


@dataclass
class Text:
    text: str
    style: Style = ""
    pre: bool = False  # keep line breaks and use a monospace font (log tails, commands)


Block = Union[Table, Text]


#: a figure as the tables format one: a number, maybe signed (~ before a change within the noise), grouped, with a
#: unit or an interval after it
_NUMERIC = re.compile(r"^~?[-+−]?[\d.,]+(e[-+]?\d+)?%?( ?(tok/s|ms|s|GiB|MiB|KiB|B|x|requests/s|runs?))?"
                      r"( \[[-+−]?[\d.,]+%?, [-+−]?[\d.,]+%?\])?$")


def numeric_text(value: Any) -> bool:
    """Whether a table cell holds a figure (right-aligned, so digits line up) rather than words (left-aligned)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, (int, float)) or bool(_NUMERIC.match(str(value).strip()))


def _missing(value: Any) -> bool:
    try:
        return value is None or value != value
    except (TypeError, ValueError):
        return False


def whole(value: Any) -> bool:
    """Whether a cell must never be broken over lines: a figure, or one word of at most 48 characters (a run id,
    a candidate name, a start time). Only prose wraps."""
    text = str(value)
    return numeric_text(value) or (len(text) <= 48 and not any(c.isspace() for c in text))


def to_rich(blocks: list[Block]) -> Any:
    from rich.console import Group
    from rich.text import Text as RichText

    from .terminal import terminal_safe

    parts: list[Any] = []
    for block in blocks:
        if isinstance(block, Text):
            parts.append(RichText(terminal_safe(block.text), style=STYLES.get(block.style, ("", ""))[0]))
        else:
            parts.append(_FittedTable(block))
    return Group(*parts)


def _rich_table(block: Table, whole_headers: bool) -> Any:
    """`block` as a rich table. A column of figures or single words (run ids, names, times) gets a fixed width, as
    wide as its longest value and its header (or, unless `whole_headers`, its header's longest word): rich then
    narrows only the prose columns, and never breaks an id or a figure."""
    from rich.table import Table as RichTable
    from rich.text import Text as RichText

    from .terminal import terminal_safe

    # every string as Text: a title, a header or a cell is user text (run ids, notes), never parsed as markup
    table = RichTable(title=RichText(terminal_safe(block.title)) if block.title else None, title_justify="left",
                      title_style="bold")
    for i, column in enumerate(block.columns):
        head = str(column)
        values = [row.values[i] for row in block.rows if i < len(row.values)]
        if values and all(whole(v) for v in values):
            heading = len(head) if whole_headers else max((len(word) for word in head.split()), default=1)
            figures = all(numeric_text(v) or str(v) == "-" for v in values)
            table.add_column(RichText(terminal_safe(head)), width=max([len(str(v)) for v in values] + [heading]),
                             justify="right" if figures else "left")
        else:
            table.add_column(RichText(terminal_safe(head)), overflow="fold")
    for row in block.rows:
        table.add_row(*[RichText(terminal_safe(str(v)), style=STYLES[row.style_of(i)][0])
                        for i, v in enumerate(row.values)],
                      style=STYLES.get(row.css, ("", ""))[0] or None)
    return table


class _FittedTable:
    """A table fitted to the console when drawn: headers on one line where the table fits, long headers wrapped at
    their spaces where it does not, and never narrower than it needs to break no id and no figure (on a narrower
    console its lines run past the edge, printed uncropped by util/terminal.py, rather than fold a run id)."""

    def __init__(self, block: Table):
        self.block = block

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        unbounded = options.update_width(10_000)
        table = _rich_table(self.block, whole_headers=True)
        if Measurement.get(console, unbounded, table).maximum > options.max_width:
            table = _rich_table(self.block, whole_headers=False)
        needed = Measurement.get(console, unbounded, table).minimum
        yield from console.render(table, options.update_width(max(options.max_width, needed)))

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        return Measurement.get(console, options, _rich_table(self.block, whole_headers=False))


def to_html(blocks: list[Block]) -> str:
    out = []
    for block in blocks:
        if isinstance(block, Text):
            color = _HTML_COLORS.get(block.style)
            style = f' style="color:{color}"' if color else ""
            text = html.escape(block.text)
            if block.pre:
                out.append(f"<pre{style}>{text}</pre>")
            elif block.style == "heading":
                out.append(f"<h4>{text}</h4>")
            else:
                out.append(f"<p{style}>{text}</p>")
            continue
        if block.title:
            out.append(f"<h5>{html.escape(block.title)}</h5>")
        head = "".join(f'<th style="text-align:left">{html.escape(str(c))}</th>' for c in block.columns)
        body = []
        for row in block.rows:
            background = _HTML_ROW_BACKGROUND.get(row.css)
            style = f' style="background:{background}"' if background else ""
            # explicit alignment: JupyterLab right-aligns every table cell, words included
            cells = "".join(f'<td style="text-align:{"right" if numeric_text(v) else "left"}{_color(row.style_of(i))}">'
                            f"{html.escape(str(v))}</td>" for i, v in enumerate(row.values))
            body.append(f"<tr{style}>{cells}</tr>")
        out.append(f"<table class=\"data\"><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")
    return "\n".join(out)


def _color(style: Style) -> str:
    color = _HTML_COLORS.get(style)
    return f";color:{color}" if color else ""


def to_text(blocks: list[Block], width: int = 100) -> str:
    from rich.console import Console

    buffer = io.StringIO()
    # force_jupyter=False: inside a kernel rich would otherwise display the text itself (a second copy of
    # every view beside its HTML) and leave the buffer empty
    console = Console(file=buffer, width=width, color_system=None, force_terminal=False, force_jupyter=False,
                      legacy_windows=False)
    console.print(to_rich(blocks), crop=False)
    return buffer.getvalue().rstrip() + "\n"


def to_plain(blocks: list[Block]) -> str:
    """Text for `grep`, `awk` and CI logs: prose as lines, each table as columns two spaces apart (figures
    right-aligned) with one line per row (a cell's lines joined by ` | `), never wrapped, without box drawing."""
    lines: list[str] = []
    for block in blocks:
        if isinstance(block, Text):
            lines += block.text.splitlines() or [""]
            continue
        if block.title:
            lines.append(block.title)
        # a cell of several lines (a verdict's reasons) joined into one, so that a row stays one line
        rows = [[" | ".join(str(v).splitlines()) for v in values] for values in [block.columns] +
                [row.values for row in block.rows]]
        widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(block.columns))]
        for n, row in enumerate(rows):
            cells = [value.rjust(width) if n and numeric_text(value) else value.ljust(width)
                     for value, width in zip(row, widths, strict=False)]
            lines.append("  ".join(cells).rstrip())
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def to_csv(blocks: list[Block]) -> str:
    """The tables as CSV (prose left out); several tables are separated by a blank line, each after a `# title`
    line, so that one table alone reads straight into any CSV reader."""
    import csv

    tables = [block for block in blocks if isinstance(block, Table)]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for n, table in enumerate(tables):
        if len(tables) > 1:
            buffer.write(("\n" if n else "") + f"# {table.title or f'table {n + 1}'}\n")
        writer.writerow(table.columns)
        writer.writerows(row.values for row in table.rows)
    return buffer.getvalue()


class Renderable:
    """Mixin: define `blocks()`; get the terminal, Jupyter and plain-text renderings from it."""

    def blocks(self) -> list[Block]:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def __rich__(self):
        return to_rich(self.blocks())

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        blocks = self.blocks()
        return {"text/plain": to_text(blocks), "text/html": to_html(blocks)}

    def __str__(self) -> str:
        return to_text(self.blocks())
