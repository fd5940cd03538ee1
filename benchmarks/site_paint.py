"""How soon does a study page show its text in Chromium: first contentful paint, against a target of 0.5 s.

Copies the committed vLLM journal, judges it under its study, builds the site, and loads the study page in
headless Chromium several times (a fresh page each time, the browser's cache cleared), reading the paint timing
the browser itself records. Charts are drawn after the text (site.js); the time until every chart is drawn is
printed beside it, for the reader, with no target.

    .venv/bin/python benchmarks/site_paint.py [--loads 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from servebook.config import load_study
from servebook.journal import Journal, samples
from servebook.present import build_site
from servebook.verdicts import judge

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=7)
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("Chromium is missing: `make browser` installs Debian's chromium package")
    root = Path(tempfile.mkdtemp(prefix="servebook-paint-"))
    journal = Journal(root / "journal")
    shutil.copytree(samples.sample_journal("sample-journal-vllm"), journal.root)
    judge(load_study(REPO / "data" / "studies" / "h200-vllm-1b.yaml"), journal)
    build_site(journal, root / "site")
    page_path = root / "site" / "studies" / "h200-vllm-1b.html"

    from playwright.sync_api import sync_playwright

    paints, drawn = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        for _ in range(args.loads):
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            page = context.new_page()
            page.goto(page_path.as_uri())
            page.wait_for_function("() => document.documentElement.dataset.charts === 'drawn'")
            paints.append(page.evaluate(
                "() => performance.getEntriesByName('first-contentful-paint')[0].startTime") / 1000)
            drawn.append(page.evaluate("() => performance.now()") / 1000)
            context.close()
        browser.close()
    shutil.rmtree(root)
    paint = statistics.median(paints)
    print(f"study page, first contentful paint: median {paint:.3f} s over {args.loads} loads "
          f"(min {min(paints):.3f}, max {max(paints):.3f})   target <= {TARGET_S} s: {paint / TARGET_S:.2f} of it, "
          f"{'met' if paint <= TARGET_S else 'NOT met'}")
    print(f"every chart drawn by: median {statistics.median(drawn):.2f} s (no target: drawn after the text)")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
