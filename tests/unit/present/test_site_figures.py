"""The latency figures of a run sealed before cells.parquet carried them are computed once and kept in the site's
cache (issue 52): a later build, even one that summarises every run again (a new servebook), reads no request row."""

import pyarrow.parquet as pq
import pytest

from servebook.journal import Journal
from servebook.journal.record import RunRecord
from servebook.journal.synthetic import write_synthetic_run
from servebook.measure.figures.latency import LATENCY_COLUMNS
from servebook.present import build_site


def as_sealed_before(record) -> None:
    """The run as a servebook before the figures were stored wrote it: its cells without them."""
    path = record.table_path("cells")
    table = pq.read_table(path)
    pq.write_table(table.drop_columns([c for c in LATENCY_COLUMNS if c in table.column_names]), path)


def site_files(out) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and not str(p.relative_to(out)).startswith((".servebook-site.json", ".cache"))}


def forget_summaries(out):
    """The site's state and its kept summaries gone: the next build summarises every run again."""
    (out / ".servebook-site.json").unlink()
    for path in (out / ".cache").glob("summaries*.pickle"):
        path.unlink()


def test_an_old_runs_figures_are_computed_once_and_no_later_build_reads_its_requests(tmp_path, monkeypatch):
    journal = Journal(tmp_path / "journal")
    old = write_synthetic_run(journal, index=1, label="baseline", verdict="accepted", requests=40)
    write_synthetic_run(journal, index=2, label="faster", verdict="accepted", requests=40)
    as_sealed_before(old)
    out = tmp_path / "site"
    build_site(journal, out)
    assert (out / ".cache" / "latency" / f"{old.run_id}.json").is_file()
    page = (out / "runs" / f"{old.run_id}.html").read_text()
    assert "Latency percentiles and throughput" in page
    first = site_files(out)

    original = RunRecord.table

    def table(self, name):
        if name in ("requests", "chunks"):
            raise AssertionError(f"{name} read again")
        return original(self, name)

    monkeypatch.setattr(RunRecord, "table", table)
    forget_summaries(out)  # every run summarised again, as after an update of servebook
    build_site(journal, out)
    assert site_files(out) == first
    (out / ".cache" / "latency" / f"{old.run_id}.json").unlink()
    forget_summaries(out)
    with pytest.raises(AssertionError, match="requests read again"):
        build_site(journal, out)  # the test can fail: without the kept figures, the rows are read
