"""The static site: the journal rendered for readers, working from file:// with no network.

The build is incremental. Each run is summarised once into a cache keyed by the run's file
fingerprint (sizes and mtimes of what the journal holds for it); every page records the hash of
the data it was rendered from, and a page whose inputs did not change is not rewritten.
Everything that comes from the journal is escaped by jinja2's autoescape.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shlex
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable

import pandas as pd
import yaml

from . import __version__
from .journal import Journal, RunRecord
from .progress import Reporter

_HERE = Path(__file__).parent
TEMPLATES = _HERE / "site_templates"
ASSETS = _HERE / "site_assets"
STATE_FILE = ".servebook-site.json"
CACHE_DIR = ".cache"
LOG_LINES = 60
REPLICAS = (1, 2, 4, 8)

DECODE_DEFINITIONS = [
    "Aggregate tok/s: sum of completion tokens over the cell / (first send to last finish).",
    "Per request tok/s: median over requests of (completion_tokens - 1) / (t_last - t_first); prompt reading excluded.",
    "TTFT: median time from send to the first content-bearing chunk.",
    "Output length is forced (ignore_eos + max_tokens) and checked per request; a wrong length makes the cell invalid.",
    "Reconciliation: the engine's prompt, cached and generated token counters over the cell must equal the client's "
    "usage sums; otherwise the cell is invalid and says by how much.",
]
PREFILL_DEFINITIONS = [
    "Cold prefill tok/s: prompt_tokens / TTFT with max_tokens=1 and a unique first token per request, so nothing is "
    "cached; includes scheduling and first-token overhead. Verified cold by the cached-token counters.",
    "First token: median TTFT of those requests.",
]
GAP_NOTE = ("Chunk gaps (ITL) are recorded per streamed chunk: speculative decoding sends several tokens in one "
            "chunk, so a gap is not a per-token figure.")


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "study"


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _num(value: Any) -> float | None:
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if value != value else value  # NaN -> None


def _fmt(value: Any, spec: str = ".1f", scale: float = 1.0, suffix: str = "") -> str:
    number = _num(value)
    return "-" if number is None else f"{number * scale:{spec}}{suffix}"


@dataclass
class Frame:
    """A table ready for the template: column names, rows of strings, an optional row class."""

    columns: list[str]
    rows: list["Row"] = field(default_factory=list)


@dataclass
class Row:
    values: list[Any]
    css: str = ""


def _atomic_write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode() if isinstance(text, str) else text
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def run_fingerprint(directory: Path) -> str:
    """Changes whenever anything the site shows of this run changes (files added, sealed, judged)."""
    parts = []
    for path in sorted(directory.rglob("*")):
        if path.is_file() and not path.name.startswith("."):
            stat = path.stat()
            parts.append((str(path.relative_to(directory)), stat.st_size, stat.st_mtime_ns))
    return _hash(parts)


def summarize_run(record: RunRecord) -> dict:
    """Everything the pages need from one run, as JSON, so unchanged runs are never re-read."""
    identity = record.identity
    manifest = record.manifest or {}
    cells = record.table("cells") if record.status == "completed" else None
    cell_rows = []
    if cells is not None and not cells.empty:
        cell_rows = json.loads(cells.to_json(orient="records"))
    verdicts = record.verdicts()
    latest = verdicts[-1] if verdicts else {}
    decode = [c for c in cell_rows if c.get("kind") == "decode" and c.get("valid")]
    prefill = [c for c in cell_rows if c.get("kind") == "prefill" and c.get("valid")]
    top_c = max((c["concurrency"] for c in decode), default=None)
    top_p = max((int(c["target_prompt_tokens"]) for c in prefill), default=None)
    decode_value = _mean([c["aggregate_tok_s"] for c in decode if c["concurrency"] == top_c])
    prefill_value = _mean([c["prefill_tok_s"] for c in prefill if c["target_prompt_tokens"] == top_p])
    from .figures import chunk_gap_histogram_data

    launch = {}
    if (record.dir / "launch.json").is_file():
        try:
            launch = json.loads((record.dir / "launch.json").read_text())
        except json.JSONDecodeError:
            launch = {}
    return {
        "run_id": record.run_id,
        "status": record.status,
        "label": record.candidate_label,
        "candidate_id": identity.get("candidate_id"),
        "candidate": identity.get("candidate") or {},
        "plan_id": identity.get("plan_id"),
        "study": identity.get("study"),
        "engine": (identity.get("candidate") or {}).get("engine"),
        "simulated": bool(((identity.get("candidate") or {}).get("launch") or {}).get("simulator")),
        "gates": ((manifest.get("summary") or {}).get("gates")) or {},
        "started_at": manifest.get("started_at") or identity.get("started_at"),
        "sealed_at": manifest.get("sealed_at"),
        "failure": manifest.get("failure"),
        "summary": manifest.get("summary"),
        "environment": manifest.get("environment") or {},
        "argv": (manifest.get("engine") or {}).get("argv") or launch.get("argv") or [],
        "cells": cell_rows,
        "verdicts": verdicts,
        "verdict": latest.get("outcome"),
        "reasons": latest.get("reasons") or [],
        "rules": latest.get("rules"),
        "rules_hash": latest.get("rules_hash"),
        "baseline_run_id": latest.get("baseline_run_id"),
        "decode_value": decode_value,
        "decode_at": top_c,
        "prefill_value": prefill_value,
        "prefill_at": top_p,
        "chunk_gaps": chunk_gap_histogram_data(record),
        "log_tail": record.log_tail(LOG_LINES),
        "files": sorted(p.name for p in record.dir.iterdir() if p.is_file() and not p.name.startswith(".")),
    }


def _mean(values: list) -> float | None:
    numbers = [v for v in (_num(x) for x in values) if v is not None]
    return sum(numbers) / len(numbers) if numbers else None


def _cells_frame(summaries: Iterable[dict]) -> pd.DataFrame:
    rows = [dict(cell, candidate=s["label"], run_id=s["run_id"], order=i)
            for i, s in enumerate(summaries) for cell in s["cells"]]
    return pd.DataFrame(rows)


def _charts(summaries: list[dict], prefix: str) -> list[dict]:
    from .figures import figure_specs

    cells = _cells_frame(summaries)
    if cells.empty:
        return []
    specs = figure_specs(cells, {s["label"]: s["chunk_gaps"] for s in summaries})
    return [{"id": f"{prefix}-chart-{i}", "figure": spec} for i, spec in enumerate(specs)]


def _decode_sections(summaries: list[dict]) -> list[dict]:
    """The tables practitioners publish: per category, Requests | Aggregate | Per request | TTFT."""
    cells = _cells_frame(summaries)
    sections = []
    if cells.empty:
        return sections
    decode = cells[cells["kind"] == "decode"]
    if not decode.empty:
        tables = []
        several = len(summaries) > 1
        for category, group in decode.groupby("category", sort=False):
            frame = Frame((["Candidate"] if several else []) + ["Requests", "Aggregate tok/s", "Per request tok/s",
                                                                 "TTFT", "Check"])
            for row in group.sort_values(["order", "concurrency"]).itertuples():
                check = "ok" if row.valid else f"INVALID: {row.invalid_reasons}"
                values = ([row.candidate] if several else []) + [
                    int(row.concurrency), _fmt(row.aggregate_tok_s), _fmt(row.per_request_tok_s),
                    _fmt(row.ttft_s, ".0f", 1000, " ms"), check]
                frame.rows.append(Row(values, "" if row.valid else "invalid"))
            tables.append({"title": f"{category} prompts", "frame": frame})
        sections.append({"title": "Decode", "tables": tables, "definitions": DECODE_DEFINITIONS + [GAP_NOTE]})
    prefill = cells[cells["kind"] == "prefill"]
    if not prefill.empty:
        several = len(summaries) > 1
        frame = Frame((["Candidate"] if several else []) + ["Prompt tokens", "Prefill tok/s", "First token", "Check"])
        for row in prefill.sort_values(["order", "target_prompt_tokens"]).itertuples():
            check = "ok" if row.valid else f"INVALID: {row.invalid_reasons}"
            values = ([row.candidate] if several else []) + [
                int(row.target_prompt_tokens), _fmt(row.prefill_tok_s, ".0f"), _fmt(row.ttft_s, ".0f", 1000, " ms"), check]
            frame.rows.append(Row(values, "" if row.valid else "invalid"))
        sections.append({"title": "Cold prefill", "tables": [{"title": "by prompt size", "frame": frame}],
                         "definitions": PREFILL_DEFINITIONS})
    return sections


def _cells_detail(summary: dict) -> Frame:
    frame = Frame(["cell", "requests", "errors", "prompt tokens", "cached", "generated", "reconciliation", "valid"])
    for cell in summary["cells"]:
        frame.rows.append(Row([cell["cell_id"], cell["requests"], cell["errors"], cell["prompt_tokens"],
                               cell["cached_tokens"], cell["completion_tokens"],
                               f"{cell['reconciliation']}: {cell['reconciliation_message']}",
                               "yes" if cell["valid"] else f"no: {cell['invalid_reasons']}"],
                              "" if cell["valid"] else "invalid"))
    return frame


def _environment(summary: dict) -> Frame:
    frame = Frame(["", ""])
    for key, value in summary["environment"].items():
        if isinstance(value, (dict, list)):
            value = json.dumps(value, sort_keys=True) if value else "-"
        frame.rows.append(Row([key, "-" if value is None else value]))
    return frame


def _planning(summaries: list[dict]) -> Frame:
    frame = Frame(["candidate", "measured unit"] + [f"{n} replicas (arithmetic)" for n in REPLICAS[1:]])
    for s in summaries:
        if s["decode_value"] is None:
            continue
        unit = s["decode_value"]
        frame.rows.append(Row([s["label"], f"{unit:.1f} tok/s at {s['decode_at']} requests"] +
                              [f"{unit * n:.0f} tok/s" for n in REPLICAS[1:]],
                              "accepted" if s["verdict"] == "accepted" else ""))
    return frame


class SiteBuilder:
    def __init__(self, journal: Journal, out: str | Path, reporter: Reporter | None = None):
        self.journal = journal
        self.out = Path(out)
        self.reporter = reporter or Reporter(quiet=True)
        self.written: list[str] = []
        self.skipped = 0

    @cached_property
    def env(self):
        import jinja2

        env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                                 undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        return env

    @cached_property
    def template_version(self) -> str:
        # The renderer's own code is an input of every page too.
        sources = [p for folder in (TEMPLATES, ASSETS) for p in sorted(folder.iterdir())] + [Path(__file__)]
        parts = [(p.name, p.read_bytes()) for p in sources]
        return hashlib.sha256(repr(parts).encode() + __version__.encode()).hexdigest()[:16]

    def _load_state(self) -> dict:
        path = self.out / STATE_FILE
        try:
            state = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return {"runs": {}, "pages": {}}
        if state.get("template_version") != self.template_version:
            state["pages"] = {}
        return state

    def _page(self, relative: str, inputs: Any, render) -> None:
        key = _hash([self.template_version, inputs])
        target = self.out / relative
        if self.state["pages"].get(relative) == key and target.is_file():
            self.skipped += 1
            return
        _atomic_write(target, render())
        self.state["pages"][relative] = key
        self.written.append(relative)

    def _render(self, template: str, root: str, **context) -> str:
        return self.env.get_template(template).render(root=root, version=__version__, studies=self.study_links,
                                                      charts=context.pop("charts", []), **context)

    def build(self) -> "BuildReport":
        started = time.monotonic()
        self.out.mkdir(parents=True, exist_ok=True)
        self.state = self._load_state()
        self.state["template_version"] = self.template_version
        summaries = self._summaries()
        self._assets()
        by_study: dict[str, list[dict]] = {}
        for s in summaries:
            if s["study"]:
                by_study.setdefault(s["study"], []).append(s)
        self.study_links = [{"name": name, "slug": _slug(name)} for name in sorted(by_study)]
        links_key = self.study_links

        with self.reporter.task(f"site: {len(summaries)} run pages", total=len(summaries)) as task:
            for s in summaries:
                self._run_page(s, links_key)
                task.advance()
        for name, runs in by_study.items():
            self._study_page(name, runs, links_key)
        self._index_page(summaries, links_key)
        self._compare_page(summaries, links_key)
        self._remove_stale({s["run_id"] for s in summaries})
        _atomic_write(self.out / STATE_FILE, json.dumps(self.state, sort_keys=True))
        return BuildReport(self.out, len(summaries), self.written, self.skipped, time.monotonic() - started)

    def _summaries(self) -> list[dict]:
        cache = self.out / CACHE_DIR
        cache.mkdir(parents=True, exist_ok=True)
        summaries = []
        run_ids = self.journal.run_ids()
        with self.reporter.task(f"site: read {len(run_ids)} runs", total=len(run_ids)) as task:
            for run_id in run_ids:
                directory = self.journal.runs_dir / run_id
                # The summary's shape follows this code, so a new servebook re-reads every run once.
                fingerprint = _hash([run_fingerprint(directory), self.template_version])
                cached = cache / f"{run_id}.json"
                if self.state["runs"].get(run_id) == fingerprint and cached.is_file():
                    summary = json.loads(cached.read_text())
                else:
                    summary = summarize_run(self.journal.run(run_id))
                    _atomic_write(cached, json.dumps(summary, default=str))
                    self.state["runs"][run_id] = fingerprint
                summary["study_slug"] = _slug(summary["study"]) if summary["study"] else None
                summary["fingerprint"] = fingerprint
                summaries.append(summary)
                task.advance()
        return summaries

    def _assets(self) -> None:
        import plotly

        plotly_js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
        for source in [*sorted(ASSETS.iterdir()), plotly_js]:
            target = self.out / "assets" / source.name
            stat = source.stat()
            key = _hash([source.name, stat.st_size, stat.st_mtime_ns])
            if self.state["pages"].get(f"assets/{source.name}") == key and target.is_file():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            self.state["pages"][f"assets/{source.name}"] = key
            self.written.append(f"assets/{source.name}")

    def _run_page(self, s: dict, links: list) -> None:
        run_id = s["run_id"]
        data_dir = f"runs/{run_id}"
        downloads = self._downloads(s)
        notebook = "notebook.ipynb" in s["files"]
        if notebook:
            self._page(f"{data_dir}/notebook.html", [s["fingerprint"], links],
                       lambda: self._render("notebook.html.j2", "../../", title=f"notebook of {run_id}",
                                            run_id=run_id, notebook_html=render_notebook(
                                                self.journal.runs_dir / run_id / "notebook.ipynb")))

        def render() -> str:
            run = dict(s)
            run["sections"] = _decode_sections([s]) if s["cells"] else []
            run["cells_detail"] = _cells_detail(s)
            run["environment"] = _environment(s)
            run["candidate_yaml"] = yaml.safe_dump(s["candidate"], sort_keys=False) if s["candidate"] else "-"
            run["command"] = shlex.join(s["argv"]) if s["argv"] else "-"
            run["downloads"] = downloads
            run["notebook"] = notebook
            run["log_lines"] = LOG_LINES
            run["invalid_cells"] = {c["cell_id"]: c["invalid_reasons"] for c in s["cells"] if not c["valid"]}
            return self._render("run.html.j2", "../", title=f"run {run_id}", run=run,
                                charts=_charts([s], "run") if s["cells"] else [])

        self._page(f"runs/{run_id}.html", [s["fingerprint"], links], render)

    def _downloads(self, s: dict) -> list[dict]:
        """Copies of the raw files, plus a CSV of every parquet table, beside the run page."""
        run_id = s["run_id"]
        source = self.journal.runs_dir / run_id
        target = self.out / "runs" / run_id / "data"
        key = s["fingerprint"]
        listing = []
        for name in s["files"]:
            if name.endswith(".parquet"):
                listing.append({"name": name, "href": f"{run_id}/data/{name}", "note": "parquet"})
                listing.append({"name": name.replace(".parquet", ".csv"),
                                "href": f"{run_id}/data/{name.replace('.parquet', '.csv')}", "note": "CSV of the same"})
            elif name in ("manifest.json", "launch.json", "engine.log"):
                listing.append({"name": name, "href": f"{run_id}/data/{name}", "note": ""})
        if self.state["pages"].get(f"runs/{run_id}/data") == key and target.is_dir():
            return listing
        target.mkdir(parents=True, exist_ok=True)
        import pyarrow.csv
        import pyarrow.parquet

        for name in s["files"]:
            if name.endswith(".parquet"):
                shutil.copyfile(source / name, target / name)
                table = pyarrow.parquet.read_table(source / name)
                pyarrow.csv.write_csv(table, target / name.replace(".parquet", ".csv"))
            elif name in ("manifest.json", "launch.json", "engine.log"):
                shutil.copyfile(source / name, target / name)
        self.state["pages"][f"runs/{run_id}/data"] = key
        return listing

    def _study_page(self, name: str, runs: list[dict], links: list) -> None:
        latest: dict[str, dict] = {}
        for s in runs:  # run ids sort by time: the newest run of each candidate wins
            latest[s["label"]] = s
        chosen = list(latest.values())
        inputs = [[s["fingerprint"] for s in chosen], links]

        def render() -> str:
            from .comparison import config_diff

            diff = config_diff({s["label"]: s["candidate"] for s in chosen})
            diff_frame = Frame(["knob"] + list(diff.columns))
            for knob, row in diff.iterrows():
                diff_frame.rows.append(Row([knob] + ["-" if v is None else v for v in row.values]))
            rules_source = next((s for s in chosen if s["rules"]), None)
            study = {
                "name": name,
                "winner": [s["label"] for s in chosen if s["verdict"] == "accepted"],
                "rules": rules_source["rules"] if rules_source else None,
                "rules_hash": rules_source["rules_hash"] if rules_source else None,
                "candidates": [{"label": s["label"], "run_id": s["run_id"], "status": s["status"],
                                "verdict": s["verdict"], "reasons": s["reasons"] or _status_reason(s)} for s in chosen],
                "diff": diff_frame,
                "sections": _decode_sections([s for s in chosen if s["cells"]]),
                "planning": _planning(chosen),
            }
            return self._render("study.html.j2", "../", title=f"study {name}", study=study,
                                charts=_charts([s for s in chosen if s["cells"]], "study"))

        self._page(f"studies/{_slug(name)}.html", inputs, render)

    def _index_page(self, summaries: list[dict], links: list) -> None:
        rows = []
        for s in reversed(summaries):
            summary = s["summary"] or {}
            rows.append({
                "run_id": s["run_id"], "status": s["status"], "verdict": s["verdict"], "study": s["study"],
                "study_slug": s["study_slug"], "label": s["label"],
                "engine": f"{s['engine']} (simulated)" if s.get("simulated") else s["engine"],
                "decode_value": s["decode_value"], "prefill_value": s["prefill_value"],
                "decode_text": "" if s["decode_value"] is None else f"{s['decode_value']:.1f} at {s['decode_at']}",
                "prefill_text": "" if s["prefill_value"] is None else f"{s['prefill_value']:.0f} at {s['prefill_at']}",
                "cells": summary.get("cells"), "valid_cells": summary.get("valid_cells"),
                "cause": (s["failure"] or {}).get("cause"),
            })
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        self._page("index.html", [rows, links],
                   lambda: self._render("index.html.j2", "", title="runs", runs=rows, counts=sorted(counts.items())))

    def _compare_page(self, summaries: list[dict], links: list) -> None:
        keep = ("cell_id", "kind", "concurrency", "target_prompt_tokens", "aggregate_tok_s", "per_request_tok_s",
                "ttft_s", "prefill_tok_s", "valid")
        data = {"runs": {s["run_id"]: {"label": s["label"], "status": s["status"],
                                       "cells": [{k: c.get(k) for k in keep} for c in s["cells"]]}
                         for s in summaries}}
        # A script, not JSON to fetch: browsers refuse fetch() from file:// pages.
        self._page("assets/runs-data.js", data,
                   lambda: "window.SERVEBOOK_RUNS = " + json.dumps(data).replace("<", "\\u003c") + ";\n")
        self._page("compare.html", [links], lambda: self._render("compare.html.j2", "", title="compare two runs"))

    def _remove_stale(self, run_ids: set[str]) -> None:
        for page in list(self.state["pages"]):
            match = re.match(r"runs/([^/]+?)(\.html|/.*)$", page)
            if match and match.group(1) not in run_ids:
                path = self.out / page
                if path.is_file():
                    path.unlink()
                elif path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                del self.state["pages"][page]


def _status_reason(s: dict) -> list[str]:
    if s["status"] == "incomplete":
        return ["incomplete: never sealed"]
    if s["failure"]:
        return [f"{s['failure']['cause']}: {s['failure']['message']}"]
    return ["not judged"]


def render_notebook(path: Path) -> str:
    """The executed notebook as an HTML fragment: injected parameters left out, scripts sanitised,
    and interactive chart outputs replaced by a note (they would need a CDN)."""
    import nbformat
    from nbconvert import HTMLExporter

    notebook = nbformat.read(path, as_version=4)
    notebook.cells = [c for c in notebook.cells if "injected-parameters" not in c.metadata.get("tags", [])]
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


@dataclass
class BuildReport:
    out: Path
    runs: int
    written: list[str]
    skipped: int
    seconds: float

    def __str__(self) -> str:
        return (f"site: {self.runs} runs, {len(self.written)} files written, {self.skipped} pages unchanged, "
                f"{self.seconds:.1f}s -> {self.out / 'index.html'}")


def build_site(journal: Journal, out: str | Path, reporter: Reporter | None = None) -> BuildReport:
    return SiteBuilder(journal, out, reporter).build()
