"""A table of the site (util.render.Table, or anything with its columns and rows) as HTML: the templates' `table`
macro calls it. Written in Python, not in the template, because a site of 1,000 runs renders over a third of a
million cells, and jinja's per-cell tests and escapes were a tenth of a full build."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

from ...util.render import numeric_text


def _cell(value: Any, style: str) -> str:
    if numeric_text(value):
        opening = f'<td class="num {style}">' if style else '<td class="num">'
    else:
        opening = f'<td class="{style}">' if style else "<td>"
    return f"{opening}{escape(value)}</td>"


def html_table(frame: Any, classes: str = "data") -> Markup:
    """Figures right-aligned (class num), words left; a row's CSS class and each value's own style as classes."""
    head = "".join(f"<th>{escape(c)}</th>" for c in frame.columns)
    rows = []
    for row in frame.rows:
        styles = [escape(row.style_of(i)) for i in range(len(row.values))] if row.styles else None
        cells = "".join(_cell(v, styles[i] if styles else "") for i, v in enumerate(row.values))
        css = f' class="{escape(row.css)}"' if row.css else ""
        rows.append(f"<tr{css}>{cells}</tr>\n")
    return Markup(f'<table class="{escape(classes)}">\n<thead><tr>{head}</tr></thead>\n<tbody>\n'
                  f'{"".join(rows)}</tbody>\n</table>')
