"""`make guard`: every speed target of issue 52 in one run of under a minute, each as its figure, its target and
their ratio (above 1: missed).

The full benchmarks (`make bench`) take minutes; this keeps the same targets at sizes that fit, reusing their code:
- the site (benchmarks/site_build.py): a full build at 100 and at 300 runs gives the cost of one more run, from which
  the 1,000-run build is extrapolated; one run added and nothing changed at 300 runs give the 1,000-run addition;
- the listing and the index (benchmarks/journal_ls.py): 2,000 runs, the listing scaled to 10,000 (its cost is per
  run); a warm index against reading every manifest once, a ratio in one run, on copies of the recorded runs of
  the sample journal `sample-journal` (what a journal holds) and on synthetic runs (small manifests: the scan is
  cheapest there);
- the harness per candidate (benchmarks/sweep_overhead.py) on the simulated engine, the first candidate (which
  starts the kernel) left out;
- the client's send lag at a fixed rate (benchmarks/client_ceiling.py) against the plan's lag limit.
Absolute times measure this machine as much as servebook: the load average is printed beside them. Synthetic
journals here are written without fsync (thrown away after, and fsync was most of their writing time).

    .venv/bin/python benchmarks/guard.py [--check]   # --check: exit 1 when a target is missed
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from client_ceiling import offered_load
from journal_ls import timed, warm_against_scan
from journal_ls import write_journal as write_listed
from site_build import timed_builds
from site_build import write_journal as write_site
from sweep_overhead import TARGET_S, harness_overheads, overhead_study

from servebook.journal import Journal, samples
from servebook.journal.stamps import SETTLED_NS
from servebook.present import build_site

SAMPLE = samples.sample_journal("sample-journal")
ROWS = 2000  # request rows per synthetic run, as benchmarks/site_build.py writes them: the site still copies each
# run's tables as CSV downloads, whose cost is per row (at 200 rows the guard read half the full benchmark's build)
# requests/s offered for the send lag: the busy-machine ceiling of one process (docs/findings/2026-12-01-client-ceiling.md)
RATE = 50.0

#: (target, figure, unit, limit, how it was measured)
Row = tuple[str, float, str, float | None, str]  # a limit of None: shown, held to no target


@contextmanager
def no_fsync() -> Iterator[None]:
    real = os.fsync
    os.fsync = lambda fd: None
    try:
        yield
    finally:
        os.fsync = real


def _write_share(write: Callable[..., None], root: Path, share: list[int], args: tuple) -> None:
    with no_fsync():
        for i in share:
            write(Journal(root), 1, *args, start=i)


def written(write: Callable[..., None], journal: Journal, runs: int, *args, start: int = 0) -> None:
    """`write(journal, runs, *args, start=start)` split over two forked processes: the journals are what is measured,
    not their writing, which took most of the guard's minute. Run ids are the runs' indexes', so the journal is the
    one a single process writes."""
    shares = [list(range(start + k, start + runs, 2)) for k in range(2)]
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_write_share, args=(write, journal.root, share, args)) for share in shares]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
        if worker.exitcode:
            raise SystemExit(f"guard: writing the synthetic journal failed (exit {worker.exitcode})")


def site(tmp: Path) -> list[Row]:
    journal = Journal(tmp / "site-journal")
    written(write_site, journal, 100, ROWS)
    # what a first build imports (plotly, scipy's statistics, ruptures) is paid before the clock: the per-run cost is
    # read as the difference of two builds, and only the first would carry it
    import plotly  # noqa: F401
    import ruptures  # noqa: F401
    import scipy.stats  # noqa: F401

    small = timed(lambda: build_site(journal, tmp / "site-100"))
    written(write_site, journal, 200, ROWS, start=100)
    with no_fsync():
        (full, _), (added, _), (unchanged, _) = timed_builds(journal, tmp / "site-300", ROWS)
    per_run = (full - small) / 200
    return [("site: full build of 1,000 runs", full + 700 * per_run, "s", 10.0,
             f"300 runs {full:.2f} s + 700 x {1000 * per_run:.1f} ms (100 runs: {small:.2f} s)"),
            ("site: one run added to 1,000", added + 700 * unchanged / 300, "s", 0.5,
             f"at 300 runs {added:.2f} s + 700 x an unchanged run's {1000 * unchanged / 300:.2f} ms")]


def linked_runs(sources: list[Path], runs_dir: Path, count: int) -> None:
    """`count` run directories whose files are hard links to `sources`' (copies where links cannot be made)."""
    for i in range(count):
        source = sources[i % len(sources)]
        for path in sorted(source.rglob("*")):
            target = runs_dir / f"{source.name}-{i:05d}" / path.relative_to(source)
            if path.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(path, target)
            except OSError:
                shutil.copy2(path, target)


def index(tmp: Path) -> list[Row]:
    recorded = tmp / "recorded" / "runs"
    linked_runs(sorted(p for p in (SAMPLE / "runs").iterdir() if p.is_dir()), recorded, 2000)
    synthetic = Journal(tmp / "synthetic")
    written(write_listed, synthetic, 100)
    linked_runs(sorted(p for p in synthetic.runs_dir.iterdir()), tmp / "synthetic-2000" / "runs", 2000)
    # a journal at rest: an unsealed run changed within the last SETTLED_NS may still be writing and is read on every
    # listing until it settles, which a journal written a moment ago would charge to every warm read measured here
    time.sleep(SETTLED_NS / 1e9)
    rows = []
    for name, root in (("recorded", recorded.parent), ("synthetic", tmp / "synthetic-2000")):
        cold = timed(lambda root=root: Journal(root).index())
        warm, scan = warm_against_scan(root)
        # the target is the issue's, of manifests as runs write them; synthetic ones are a tenth their size, so the
        # scan is cheapest there while the warm read still stats each run's files: the worst case, shown untargeted
        rows.append((f"warm index / manifest scan, 2,000 {name} runs", warm / scan, "",
                     0.35 if name == "recorded" else None,
                     f"{1000 * warm:.0f} ms / {1000 * scan:.0f} ms (cold {cold:.2f} s)"))
    listing = statistics.median(timed(lambda: Journal(tmp / "synthetic-2000").listing()) for _ in range(3))
    rows.append(("journal ls warm, 10,000 runs", 5 * listing, "s", 0.3, f"2,000 runs {1000 * listing:.0f} ms x 5"))
    return rows


def harness() -> Row:
    # two candidates: the first starts the kernel, the second is the figure (three took the guard past its minute)
    found = harness_overheads(overhead_study(2, simulator=True))
    rest = [overhead for _, _, _, overhead in found[1:]]
    return ("harness per candidate", statistics.median(rest), "s", TARGET_S,
            f"median of {len(rest)} simulated candidate(s) after the first ({found[0][3]:.2f} s, kernel start)")


def client() -> Row:
    cells, plan, cpu, wall = offered_load([RATE], duration=2.0)
    lag = float(cells[0]["send_lag_p99_ms"] or 0.0)
    limit = plan.load.max_lag_ms if plan.load else 50.0
    return (f"client send lag p99 at {RATE:g} requests/s", lag, "ms", limit,
            f"{cells[0]['achieved_rps']:.1f} achieved, valid: {cells[0]['invalid_codes'] or 'yes'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    started = time.perf_counter()
    rows: list[Row] = []
    took: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="servebook-guard-") as folder:
        tmp = Path(folder)
        os.environ["SERVEBOOK_CACHE"] = str(tmp / "cache")  # what reads keep: none yet, and thrown away after
        for name, measure in (("site", lambda: site(tmp)), ("index", lambda: index(tmp)),
                              ("harness", lambda: [harness()]), ("client", lambda: [client()])):
            t0 = time.perf_counter()
            rows += measure()
            took[name] = time.perf_counter() - t0
    print(f"{'target':<48} {'figure':>9} {'target':>9} {'ratio':>6}  how")
    for name, figure, unit, limit, how in rows:
        if limit is None:
            print(f"{name:<48} {figure:>7.3g}{unit:>2} {'-':>9} {'-':>6}  (no target): {how}")
            continue
        print(f"{name:<48} {figure:>7.3g}{unit:>2} {'<= ' + format(limit, 'g') + unit:>9} {figure / limit:>6.2f}  "
              f"{'met' if figure <= limit else 'NOT met'}: {how}")
    print(f"guard: {time.perf_counter() - started:.0f} s ({', '.join(f'{k} {v:.0f} s' for k, v in took.items())}); "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    if args.check and any(limit is not None and figure > limit for _, figure, _, limit, _ in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
