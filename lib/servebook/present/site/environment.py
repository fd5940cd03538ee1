"""The templates the site's pages are drawn with, compiled once per process and kept compiled across processes."""

from __future__ import annotations

import functools
from pathlib import Path

from ...util.paths import cache_root
from ...util.render import numeric_text
from ...verdicts.left_out import LeftOut
from .html_table import html_table

TEMPLATES = Path(__file__).parent / "templates"


@functools.cache
def environment():
    """One per process: compiling the templates again for each build was a fifth of adding one run. The loader
    still reloads a template whose file changed. Their compiled form is kept in servebook's cache across processes
    too (keyed by each template's source): every `servebook site` compiled them afresh, 0.19 s of adding one run to
    300. Where the cache cannot be written, they are compiled as before."""
    import jinja2

    cache = cache_root() / "jinja"
    try:
        cache.mkdir(parents=True, exist_ok=True)
        bytecode: jinja2.BytecodeCache | None = jinja2.FileSystemBytecodeCache(str(cache))
    except OSError:
        bytecode = None
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             bytecode_cache=bytecode)
    env.tests["numeric_text"] = numeric_text  # figures right-aligned, words left
    env.globals["html_table"] = html_table
    env.filters["left_out"] = lambda cells: LeftOut.of(cells).text()  # a verdict's cells left out, as one count
    return env
