"""How long does `servebook site` take on a big journal, in full and after adding one run?

Writes a synthetic journal of N runs (2,000 request rows each, through the same writer as real
runs), builds the site from nothing, then adds one run and builds again, and opens the index in
Chromium. Targets on this 2-core machine: a full build of 1,000 runs in at most 10 s and of 10,000
in at most 60 s (6 ms a run), one added run in at most 0.5 s, the index open in under 2 s. Each build's time
is printed also as its share of the target (measured / target), with the load the machine was under.

    .venv/bin/python benchmarks/site_build.py [--runs 1000] [--rows 2000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from servebook.journal import Journal
from servebook.journal.synthetic import write_synthetic_run
from servebook.present import build_site
from servebook.present.site.builder import BuildReport


def open_index(path: Path) -> float | None:
    """Seconds from navigation to the first page of runs in headless Chromium (None without a browser)."""
    import shutil as which

    browser_path = which.which("chromium") or which.which("chromium-browser")
    if browser_path is None:
        return None
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        page = browser.new_page()
        t0 = time.perf_counter()
        page.goto(path.as_uri(), wait_until="load")
        page.wait_for_selector("#runs tbody tr")
        seconds = time.perf_counter() - t0
        browser.close()
    return seconds


def write_journal(journal: Journal, runs: int, rows: int, start: int = 0) -> None:
    """`runs` synthetic runs of 20 studies with `rows` request rows each: 1 in 50 failed, 1 in 97 never sealed."""
    for i in range(start, start + runs):
        status = "failed" if i % 50 == 7 else "incomplete" if i % 97 == 5 else "completed"
        write_synthetic_run(journal, index=i, study=f"study-{i % 20}", status=status, requests=rows,
                            verdict=None if status == "incomplete" else ("accepted" if i % 3 else "rejected"))


def timed_builds(journal: Journal, out: Path, rows: int) -> list[tuple[float, BuildReport]]:
    """A full build into `out` (empty), a build after one run is added, and a build after nothing changed: each
    one's seconds and report."""
    timed = []
    for step in ("full", "added", "unchanged"):
        if step == "added":
            write_synthetic_run(journal, index=len(journal.run_ids()), study="study-0", requests=rows,
                                verdict="accepted")
        # What was just written goes to disk first: the timed build is one of runs sealed some time ago, not one
        # racing the write-back of the synthetic journal (which moved the same full build from 8.7 to 10.1 s).
        os.sync()
        t0 = time.perf_counter()
        report = build_site(journal, out)
        timed.append((time.perf_counter() - t0, report))
    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--keep", type=Path, help="build here and keep the result")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="servebook-site-bench-"))
    journal = Journal(root / "journal")
    t0 = time.perf_counter()
    write_journal(journal, args.runs, args.rows)
    written = time.perf_counter() - t0
    print(f"synthetic journal: {args.runs} runs x {args.rows} request rows written in {written:.1f} s")

    (full_s, full), (incremental_s, incremental), (noop_s, noop) = timed_builds(journal, root / "site", args.rows)

    target = 0.006 * args.runs if args.runs > 1000 else 10.0
    added_target = 0.5
    print(f"full build:        {full_s:6.2f} s  ({len(full.written)} files written)   target <= {target:.0f} s: "
          f"{full_s / target:.2f} of it, {'met' if full_s <= target else 'NOT met'}")
    print(f"incremental build: {incremental_s:6.2f} s  ({len(incremental.written)} files written: "
          f"{', '.join(sorted(incremental.written)[:6])}{' ...' if len(incremental.written) > 6 else ''})   "
          f"target <= {added_target} s: {incremental_s / added_target:.2f} of it, "
          f"{'met' if incremental_s <= added_target else 'NOT met'}")
    print(f"no-change build:   {noop_s:6.2f} s  ({len(noop.written)} files written)")
    print(f"ratio full / incremental: {full_s / incremental_s:.0f}x; per run {1000 * full_s / args.runs:.1f} ms; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    opened = open_index(root / "site" / "index.html")
    if opened is not None:
        print(f"index in Chromium: {opened:.2f} s to the first page of runs   target < 2 s: "
              f"{'met' if opened < 2 else 'NOT met'}")
    if not args.keep:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
