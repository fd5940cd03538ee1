"""The executed notebook of a run as an HTML fragment for its site page."""

from __future__ import annotations

import html
from pathlib import Path


def render_notebook(path: Path) -> str:
    """The executed notebook as an HTML fragment: the parameters that ran it (papermill's injected cell, in place
    of the notebook's defaults), scripts sanitised, and interactive chart outputs replaced by a note (they would
    need a CDN)."""
    import nbformat
    from nbconvert import HTMLExporter

    notebook = nbformat.read(path, as_version=4)
    injected = any("injected-parameters" in c.metadata.get("tags", []) for c in notebook.cells)
    if injected:  # the defaults did not run this notebook: the injected values did
        notebook.cells = [c for c in notebook.cells if "parameters" not in c.metadata.get("tags", [])]
    for cell in notebook.cells:
        if cell.cell_type == "markdown" and "<script" in cell.source.lower():
            cell.source = html.escape(cell.source)
        for output in cell.get("outputs", []):
            data = output.get("data") or {}
            if "application/vnd.plotly.v1+json" in data:
                output["data"] = {"text/plain": "[interactive chart: drawn on the run page from the recorded cells]"}
            elif "text/html" in data and "<script" in "".join(data["text/html"]).lower():
                data.pop("text/html")
    # Outputs with scripts are gone above; the rest is servebook's own escaped HTML and plain text.
    # (nbconvert's sanitize_html escaped every tag, tables included, which made the page unreadable.)
    exporter = HTMLExporter(template_name="basic")
    body, _ = exporter.from_notebook_node(notebook)
    return body


