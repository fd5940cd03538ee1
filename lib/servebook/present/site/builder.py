"""The static site: the journal rendered for readers, working from file:// with no network.

The build is incremental. Each run is summarised once into a cache keyed by the run's file fingerprint (sizes and
mtimes of what the journal holds for it; summary_cache.py); every page records the hash of its inputs (data, or the
fingerprints of the runs it draws), and one whose inputs did not change is not rewritten.
Everything that comes from the journal is escaped by jinja2's autoescape.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from ..._version import __version__
from ...config.secrets import Scrubber
from ...journal.index import index_frame
from ...journal.stamps import sealed, stamps
from ...journal.store import Journal
from ...util.progress import Reporter
from ...util.render import to_html
from ..comparison import diff_table
from ..figures import forest_spec
from ..tables import memory_table, verification_table
from .answer import answer_context, covering_verdicts, study_answer_of
from .compare import compare_pages
from .downloads import Converter, listing
from .environment import TEMPLATES, environment
from .files import write_page
from .identities import history_pages
from .latency_cache import cells_table
from .notebook_html import render_notebook
from .pages import (
    LOG_LINES,
    STUDY_DEFINITIONS,
    candidate_yaml,
    cells_detail,
    cells_frame,
    charts,
    comparisons_of,
    content_hash,
    environment_table,
    judged_runs,
    noise_table_for,
    page_slug,
    run_fingerprint,
    sections,
    study_charts,
    study_figures,
    summarize_run,
)
from .planning import memory_overview, planning_table
from .study_downloads import study_downloads, study_files
from .summary import RunSummary, key_variable
from .summary_cache import SummaryCache
from .verdict_rows import verdict_rows

_HERE = Path(__file__).parent
INDEX_PAGE = 100  # runs per page of the index
ASSETS = _HERE / "assets"
STATE_FILE = ".servebook-site.json"
CACHE_DIR = ".cache"
class SiteBuilder:
    def __init__(self, journal: Journal, out: str | Path, reporter: Reporter | None = None):
        self.journal = journal
        self.out = Path(out)
        self.reporter = reporter or Reporter(quiet=True)
        self.written: list[str] = []
        self.skipped = 0
        self.scrubber = Scrubber.from_environment()  # once per build: it reads the whole environment
        self.converter = Converter()

    @property
    def env(self):
        return environment()

    @cached_property
    def template_version(self) -> str:
        # The renderer's own code is an input of every page too: templates, assets and every module that draws
        # (present/, the rendering blocks, the statistics the pages show, the figures and tail rule of their cells,
        # how verdict events read back and a fault's words as its code).
        package = _HERE.parents[1]
        code = sorted(package.joinpath("present").rglob("*.py")) + sorted(package.joinpath("verdicts").rglob("*.py")) \
            + [package / "util" / "render.py", package / "journal" / "events.py"] \
            + sorted(package.joinpath("estimates").rglob("*.py")) \
            + [package / "measure" / name for name in ("figures/latency.py", "figures/latency_tables.py",
                                                        "figures/tails.py", "validity.py")]
        sources = [p for folder in (TEMPLATES, ASSETS) for p in sorted(folder.iterdir())] + code
        parts = [(str(p.relative_to(package)) if p.is_relative_to(package) else p.name, p.read_bytes()) for p in sources]
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
        """Write a page whose `inputs` changed (None: written, as _unchanged found what it is drawn from changed)."""
        key = None if inputs is None else content_hash([self.template_version, inputs])
        target = self.out / relative
        if key is not None and self.state["pages"].get(relative) == key and target.is_file():
            self.skipped += 1
            return
        write_page(target, self.scrubber.text(render()))  # a page holds no byte of a key, whatever drew it
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
        try:
            summaries = self._summaries()
            covering_verdicts(summaries)
            self._pages(summaries)
            for run_id, key in self.converter.finish().items():
                self.state["pages"][f"runs/{run_id}/data"] = key
        finally:
            self.converter.close()
        self._remove_stale({s.run_id for s in summaries})
        write_page(self.out / STATE_FILE, json.dumps(self.state, sort_keys=True))
        return BuildReport(self.out, len(summaries), self.written, self.skipped, time.monotonic() - started)

    def _pages(self, summaries: list[RunSummary]) -> None:
        self._assets()
        by_study: dict[str, list[RunSummary]] = {}
        for s in summaries:
            if s.study:
                by_study.setdefault(s.study, []).append(s)
        self.study_links = [{"name": name, "slug": page_slug(name)} for name in sorted(by_study)]
        self.histories = history_pages([s for s in summaries if s.status == "completed"])
        links_key = content_hash(self.study_links)  # every page's input: hashed once, not once a page

        with self.reporter.task(f"site: {len(summaries)} run pages", total=len(summaries), unit="pages") as task:
            for s in summaries:
                self._run_page(s, links_key)
                task.advance()
        for name, runs in by_study.items():
            self._study_page(name, runs, links_key)
        self._history_pages(summaries, links_key)
        self._search_pages(links_key)
        self._index_page(summaries, links_key)
        self._compare_page(summaries, links_key)

    def _summaries(self) -> list[RunSummary]:
        cache = self.out / CACHE_DIR
        summaries = []
        run_ids = self.journal.run_ids()
        sealed = self._sealed_stamps()
        kept = SummaryCache(cache, self.template_version)
        with self.reporter.task(f"site: read {len(run_ids)} runs", total=len(run_ids), unit="runs") as task:
            for run_id in run_ids:
                directory = self.journal.runs_dir / run_id
                # The summary's shape follows this code, so a new servebook re-reads every run once.
                fingerprint = content_hash([sealed.get(run_id) or run_fingerprint(directory), self.template_version])
                summary = kept.get(run_id, fingerprint)
                tables: dict[str, Any] = {}
                if summary is None:  # the one place a run's files are read; its cells go to the converter too
                    record = self.journal.run(run_id)
                    # only a completed run's: the summary reads no other's, and a damaged run's may not read
                    cells = cells_table(record.table_path("cells")) if record.status == "completed" else None
                    if cells is not None:
                        tables["cells.parquet"] = cells
                    summary = summarize_run(record, figures=cache / "latency", scrubber=self.scrubber, cells=cells)
                kept.put(run_id, fingerprint, summary)
                summary.study_slug = page_slug(summary.study) if summary.study else None
                summary.fingerprint = fingerprint
                summaries.append(summary)
                self.scrubber = self.scrubber.adding(key_variable(summary.candidate))  # every run's key, everywhere
                target = self.out / "runs" / run_id / "data"  # its files converted from here on, beside the reading
                if self.state["pages"].get(f"runs/{run_id}/data") != fingerprint or not target.is_dir():
                    self.converter.submit(run_id, fingerprint, summary.files, directory, target, self.scrubber,
                                          csv=summary.status != "damaged", tables=tables)
                task.advance()
        kept.save(keep=set(run_ids))
        return summaries

    def _sealed_stamps(self) -> dict[str, str]:
        """A sealed run's stamp (journal/stamps.py), checked against the stamps this site kept from its last build:
        what a sealed run's pages show changes only where the stamp does (a new verdict or note, damage, a repair),
        and a fingerprint of every file was most of a build that added one run to 300 (0.48 ms a run against 0.02).
        Not the journal's index: a journal just written has none kept, and reading it cold cost a full build of
        1,000 runs a second. A run still writing (its engine log grows, unstamped) keeps the fingerprint of every
        file."""
        now = stamps(self.journal.runs_dir, self.state.get("stamps") or {})
        self.state["stamps"] = now
        return {run_id: stamp for run_id, stamp in now.items() if sealed(stamp)}

    def _assets(self) -> None:
        import plotly

        plotly_js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
        for source in [*sorted(ASSETS.iterdir()), plotly_js]:
            target = self.out / "assets" / source.name
            key = content_hash([source.name, source.stat().st_size, source.stat().st_mtime_ns])
            if self.state["pages"].get(f"assets/{source.name}") == key and target.is_file():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            self.state["pages"][f"assets/{source.name}"] = key
            self.written.append(f"assets/{source.name}")

    def _run_page(self, s: RunSummary, links: Any) -> None:
        run_id = s.run_id
        data_dir = f"runs/{run_id}"
        downloads = listing(run_id, s.files, csv=s.status != "damaged")
        notebook = "notebook.ipynb" in s.files
        if notebook:
            self._page(f"{data_dir}/notebook.html", [s.fingerprint, links],
                       lambda: self._render("notebook.html.j2", "../../", title=f"notebook of {run_id}",
                                            run_id=run_id, notebook_html=render_notebook(
                                                self.journal.run(run_id).notebook_path)))

        def render() -> str:
            run = dict(s)
            run["sections"] = sections([s]) if s.cells else []
            run["cells_detail"] = cells_detail(s)
            run["environment"] = environment_table(s)
            run["claims"] = verification_table(s.verification)
            run["memory"] = memory_table(s.memory)
            run["candidate_yaml"] = candidate_yaml(s.candidate)
            run["command"] = shlex.join(s.argv) if s.argv else "-"
            run["downloads"] = downloads
            run["notebook"] = notebook
            run["log_lines"] = LOG_LINES
            run["invalid_cells"] = {c["cell_id"]: c["invalid_reasons"] for c in s.cells if not c["valid"]}
            return self._render("run.html.j2", "../", title=f"run {run_id}", run=run,
                                charts=charts([s], "run") if s.cells else [])

        self._page(f"runs/{run_id}.html", [s.fingerprint, links, s.verdict, s.judged_on], render)

    def _study_page(self, name: str, runs: list[RunSummary], links: Any) -> None:
        groups = judged_runs(runs)
        chosen = [group[-1] for group in groups.values()]  # each candidate's newest judged run
        shown = [s for group in groups.values() for s in group]
        inputs = [[s.fingerprint for s in runs], links]  # every run: one the verdicts have not judged makes them stale

        def render() -> str:
            rules_source = next((s for s in chosen if s.rules), None)
            rules = rules_source.rules if rules_source else None
            found = study_answer_of(name, chosen, rules)
            study = {
                "name": name,
                "search": page_slug(name) if name in self.searched else None,
                "answer": answer_context(found),
                "rules": rules,
                "rules_hash": rules_source.rules_hash if rules_source else None,
                "candidates": verdict_rows(groups, runs, rules, found.method if found else None, self.histories),
                "diff": diff_table({s.label: s.candidate for s in chosen}),
                **study_figures(shown),
                **dict(zip(("noise", "noise_notes"), noise_table_for(groups, rules), strict=True)),
                "planning": planning_table(groups),
                "memory": memory_overview(chosen),
                "definitions": STUDY_DEFINITIONS,
                "downloads": [{"href": f"{page_slug(name)}-{d['suffix']}", "label": d["label"]}
                              for d in study_downloads()],
            }
            forest = forest_spec(comparisons_of(chosen))
            return self._render("study.html.j2", "../", title=f"study {name}", study=study,
                                charts=study_charts(forest, shown))

        self._page(f"studies/{page_slug(name)}.html", inputs, render)
        for suffix, text in study_files(name, chosen).items():  # what the page shows, as files to take away
            self._page(f"studies/{page_slug(name)}-{suffix}", inputs, lambda t=text: t)

    def _history_pages(self, summaries: list[RunSummary], links: Any) -> None:
        """A page per configuration, a name under one plan (`history NAME --plan PLAN`), from the cached summaries'
        cells; its inputs are the runs history() selects, so one new run rebuilds only its candidate's page."""
        from ...verdicts import history
        from ..history import HistoryView, history_spec

        made = set()
        for (plan, label), (slug, runs) in self.histories.items():
            def render(label: str = label, runs: list[RunSummary] = runs, plan: str = plan) -> str:
                found = history(self.journal, label, plan_id=plan or None, cells=cells_frame(runs),
                                index=index_frame([s.index_row for s in runs]))
                return self._render("history.html.j2", "../", title=f"history of {label}", label=label, plan=plan,
                                    measured_by=[{"name": n, "slug": page_slug(n)} for n in
                                             sorted({s.study for s in runs if s.study})],
                                    body=to_html(HistoryView(found).blocks()),
                                    charts=[{"id": "history-chart", "figure": history_spec(found)}])

            made.add(page := f"candidates/{slug}.html")
            self._page(page, [[s.fingerprint for s in runs], links], render)
        for page in [p for p in self.state["pages"] if p.startswith("candidates/") and p not in made]:
            (self.out / page).unlink(missing_ok=True)  # a page per bare name, or of a configuration gone
            del self.state["pages"][page]

    def _search_pages(self, links: Any) -> None:
        """A page per searched study: its newest search's history, confirmation and what was pruned, and why."""
        from ...sweeps.search import SearchResult
        from ..search import search_spec

        for name in self.searched:
            event = self.journal.searches(name)[-1]

            def render(event: dict = event, name: str = name) -> str:
                result = SearchResult.from_json(event)
                return self._render("search.html.j2", "../", title=f"search {name}", name=name, slug=page_slug(name),
                                    conclusion=result.conclusion(), body=to_html(result.blocks()),
                                    charts=[{"id": "search-chart", "figure": search_spec(result)}])

            self._page(f"searches/{page_slug(name)}.html", [event, links], render)

    @property
    def searched(self) -> list[str]:
        folder = self.journal.root / "searches"
        return sorted(p.name for p in folder.iterdir() if p.is_dir() and any(p.glob("*.json"))) if folder.is_dir() else []

    def _unchanged(self, name: str, summaries: list[RunSummary], links: Any, pages: list[str]) -> bool:
        """Whether pages drawn from every run are as their runs are: their data is not even built then."""
        key = content_hash([self.template_version, [s.fingerprint for s in summaries], links])
        if self.state["pages"].get(name) == key and all((self.out / page).is_file() for page in pages):
            self.skipped += len(pages)
            return True
        self.state["pages"][name] = key
        return False

    def _index_page(self, summaries: list[RunSummary], links: Any) -> None:
        if self._unchanged("index:inputs", summaries, links, ["assets/index-data.js", "index.html"]):
            return
        rows: list[dict[str, Any]] = []
        for s in reversed(summaries):
            summary = s.summary or {}
            rows.append({
                "run_id": s.run_id, "status": s.status, "verdict": s.verdict, "study": s.study,
                "study_slug": s.study_slug, "label": s.label,
                "engine": f"{s.engine} (simulated)" if s.simulated else s.engine,
                "decode_value": s.decode_value, "prefill_value": s.prefill_value,
                "decode_text": "" if s.decode_value is None else f"{s.decode_value:.1f} at {s.decode_at}",
                "prefill_text": "" if s.prefill_value is None else f"{s.prefill_value:.0f} at {s.prefill_at}",
                "capacity_value": s.capacity_value, "capacity_text": s.capacity_text or "",
                "cells": summary.get("cells"), "valid_cells": summary.get("valid_cells"),
                "cause": (s.failure or {}).get("cause"),
            })
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        # Every row for the page's script (filter, sort, pages); the first page also as HTML, so the newest runs
        # show at once and without scripts, and ten thousand runs do not make ten thousand table rows.
        self._page("assets/index-data.js", None,
                   lambda: "window.SERVEBOOK_INDEX = " + json.dumps(rows, default=str).replace("<", "\\u003c") + ";\n")
        first = rows[:INDEX_PAGE]
        self._page("index.html", [first, len(rows), counts, links],
                   lambda: self._render("index.html.j2", "", title="runs", runs=first, total=len(rows),
                                        page_size=INDEX_PAGE, counts=sorted(counts.items())))

    def _compare_page(self, summaries: list[RunSummary], links: Any) -> None:
        compare_pages(self, summaries, links)

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
