"""How long does `servebook journal ls` take on a 10,000-run journal, cold (no index.parquet) and warm?

Writes a synthetic journal (manifests only, through the same writer as real runs), then times the
command as a user runs it: cold once (no index.parquet and nothing in servebook's cache: the index is
rebuilt from every manifest), warm several times (the rows a read kept, only changed runs re-read),
and warm after one new run is sealed. Targets on this 2-core machine: at most 3 s cold and 0.3 s warm
for the listing itself (the command's Python start-up is printed apart).

    .venv/bin/python benchmarks/journal_ls.py [--runs 10000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from servebook.journal import Journal
from servebook.journal.record import read_manifest
from servebook.journal.synthetic import write_synthetic_run


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def write_journal(journal: Journal, runs: int, start: int = 0) -> None:
    """`runs` synthetic runs of 20 studies: 1 in 50 failed, 1 in 97 never sealed, the others judged."""
    for i in range(start, start + runs):
        status = "failed" if i % 50 == 7 else "incomplete" if i % 97 == 5 else "completed"
        write_synthetic_run(journal, index=i, study=f"study-{i % 20}", status=status, requests=0,
                            verdict=None if status == "incomplete" else ("accepted" if i % 3 else "rejected"))


def manifest_scan(journal: Journal) -> None:
    """Read every run's manifest once, as a rebuild of the index from the manifests must: what a warm index is
    measured against."""
    for run_id in journal.run_ids():
        read_manifest(journal.runs_dir / run_id / "manifest.json")


def warm_against_scan(root: Path, repeats: int = 5) -> tuple[float, float]:
    """Median seconds of a warm `Journal.index()` (after one read that kept its rows) and of a manifest scan,
    interleaved so that both see the same load."""
    Journal(root).index()
    warm, scan = [], []
    for _ in range(repeats):
        warm.append(timed(lambda: Journal(root).index()))
        scan.append(timed(lambda: manifest_scan(Journal(root))))
    return statistics.median(warm), statistics.median(scan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--keep", type=Path, help="write the journal here and keep it")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="servebook-ls-bench-"))
    journal = Journal(root / "journal")
    if not journal.run_ids():
        t0 = time.perf_counter()
        write_journal(journal, args.runs)
        print(f"synthetic journal: {args.runs} runs written in {time.perf_counter() - t0:.1f} s")
    index = journal.root / "index.parquet"
    index.unlink(missing_ok=True)
    os.environ["SERVEBOOK_CACHE"] = tempfile.mkdtemp(prefix="servebook-ls-cache-")  # what reads keep: none yet

    cold = timed(lambda: Journal(journal.root).listing())
    warm = [timed(lambda: Journal(journal.root).listing()) for _ in range(5)]
    write_synthetic_run(journal, index=len(journal.run_ids()) + 1, study="study-new", status="completed", requests=0,
                        verdict="accepted")
    one_new = timed(lambda: Journal(journal.root).listing())
    filtered = timed(lambda: Journal(journal.root).select(study="study-3", status="completed", limit=50))
    command = [sys.executable, "-m", "servebook.cli", "journal", "ls", "--journal", str(journal.root)]
    cli = [timed(lambda: subprocess.run(command, capture_output=True, check=True)) for _ in range(3)]
    startup = timed(lambda: subprocess.run([sys.executable, "-c", "import servebook.cli"], check=True))
    print(f"listing {len(journal.run_ids())} runs: cold {cold:.2f} s (target 3 s), warm median "
          f"{statistics.median(warm):.3f} s (target 0.3 s), after one new run {one_new:.3f} s, "
          f"filtered {filtered:.3f} s")
    print(f"`servebook journal ls` end to end: median {statistics.median(cli):.2f} s, of which Python and imports "
          f"{startup:.2f} s")
    print(f"ratios: cold/target {cold / 3:.2f}, warm/target {statistics.median(warm) / 0.3:.2f}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
