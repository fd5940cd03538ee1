"""How long does `servebook site` take on a big journal, in full and after adding one run?

Writes a synthetic journal of N runs (2,000 request rows each, through the same writer as real
runs), builds the site from nothing, then adds one run and builds again. Targets on this
machine: at most 30 s for the full build of 1,000 runs and at most 2 s for the incremental one.

    .venv/bin/python benchmarks/site_build.py [--runs 1000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from servebook.journal import Journal
from servebook.present import build_site
from servebook.journal.synthetic import write_synthetic_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--keep", type=Path, help="build here and keep the result")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="servebook-site-bench-"))
    journal = Journal(root / "journal")
    t0 = time.perf_counter()
    for i in range(args.runs):
        status = "failed" if i % 50 == 7 else "incomplete" if i % 97 == 5 else "completed"
        write_synthetic_run(journal, index=i, study=f"study-{i % 20}", status=status, requests=args.rows,
                            verdict=None if status == "incomplete" else ("accepted" if i % 3 else "rejected"))
    written = time.perf_counter() - t0
    print(f"synthetic journal: {args.runs} runs x {args.rows} request rows written in {written:.1f} s")

    t0 = time.perf_counter()
    full = build_site(journal, root / "site")
    full_s = time.perf_counter() - t0
    write_synthetic_run(journal, index=args.runs, study="study-0", requests=args.rows, verdict="accepted")
    t0 = time.perf_counter()
    incremental = build_site(journal, root / "site")
    incremental_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    noop = build_site(journal, root / "site")
    noop_s = time.perf_counter() - t0

    print(f"full build:        {full_s:6.2f} s  ({len(full.written)} files written)   target <= 30 s: "
          f"{'met' if full_s <= 30 else 'NOT met'}")
    print(f"incremental build: {incremental_s:6.2f} s  ({len(incremental.written)} files written: "
          f"{', '.join(sorted(incremental.written)[:6])}{' ...' if len(incremental.written) > 6 else ''})   "
          f"target <= 2 s: {'met' if incremental_s <= 2 else 'NOT met'}")
    print(f"no-change build:   {noop_s:6.2f} s  ({len(noop.written)} files written)")
    print(f"ratio full / incremental: {full_s / incremental_s:.0f}x")
    if not args.keep:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
