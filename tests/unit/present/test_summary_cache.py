"""The site's summaries of the last build, kept in one file: given back only for the same run files and the same
servebook, and a file that cannot be read is no cache, never an error."""

from servebook.present.site.summary import RunSummary
from servebook.present.site.summary_cache import FILE, SummaryCache


def summary(run_id: str, label: str = "a") -> RunSummary:
    return RunSummary(run_id=run_id, status="completed", label=label)


def test_a_summary_comes_back_for_its_fingerprint_and_version_only(tmp_path):
    cache = SummaryCache(tmp_path / "cache", "v1")
    cache.put("r1", "f1", summary("r1"))
    cache.put("r2", "f2", summary("r2"))
    cache.save(keep={"r1", "r2"})
    again = SummaryCache(tmp_path / "cache", "v1")
    assert again.get("r1", "f1") == summary("r1")
    assert again.get("r1", "changed") is None  # the run's files changed since
    assert again.get("r3", "f3") is None
    assert SummaryCache(tmp_path / "cache", "v2").get("r1", "f1") is None  # another servebook's summaries


def test_what_the_builder_sets_on_a_summary_does_not_change_the_kept_one(tmp_path):
    cache = SummaryCache(tmp_path, "v1")
    made = summary("r1")
    cache.put("r1", "f1", made)
    made.label = "set later"
    cache.get("r1", "f1").label = "set on a copy"
    assert cache.get("r1", "f1").label == "a"


def test_runs_gone_from_the_journal_are_dropped_and_nothing_unchanged_is_written(tmp_path):
    cache = SummaryCache(tmp_path, "v1")
    cache.put("r1", "f1", summary("r1"))
    cache.put("r2", "f2", summary("r2"))
    cache.save(keep={"r1", "r2"})
    written = (tmp_path / FILE).stat().st_mtime_ns
    unchanged = SummaryCache(tmp_path, "v1")
    unchanged.put("r1", "f1", summary("r1"))
    unchanged.save(keep={"r1", "r2"})
    assert (tmp_path / FILE).stat().st_mtime_ns == written
    unchanged.save(keep={"r1"})
    assert SummaryCache(tmp_path, "v1").get("r2", "f2") is None


def test_a_file_cut_short_is_no_cache(tmp_path):
    cache = SummaryCache(tmp_path, "v1")
    cache.put("r1", "f1", summary("r1"))
    cache.save(keep={"r1"})
    (tmp_path / FILE).write_bytes((tmp_path / FILE).read_bytes()[:20])
    assert SummaryCache(tmp_path, "v1").get("r1", "f1") is None


def test_a_build_that_adds_a_run_writes_only_the_change_until_changes_reach_a_tenth(tmp_path):
    from servebook.present.site.summary_cache import CHANGES

    cache = SummaryCache(tmp_path, "v1")
    for i in range(20):
        cache.put(f"r{i}", f"f{i}", summary(f"r{i}"))
    cache.save(keep={f"r{i}" for i in range(20)})
    whole = (tmp_path / FILE).stat().st_mtime_ns
    added = SummaryCache(tmp_path, "v1")
    added.put("r20", "f20", summary("r20"))
    added.save(keep={f"r{i}" for i in range(21)} - {"r3"})  # one run added, one gone from the journal
    assert (tmp_path / FILE).stat().st_mtime_ns == whole and (tmp_path / CHANGES).is_file()
    merged = SummaryCache(tmp_path, "v1")
    assert merged.get("r20", "f20") == summary("r20") and merged.get("r3", "f3") is None
    assert merged.get("r5", "f5") == summary("r5")
    merged.put("r21", "f21", summary("r21"))
    merged.save(keep=set(merged.kept) | {"r21"})  # three changes among 20: past a tenth, merged into the whole
    assert (tmp_path / FILE).stat().st_mtime_ns != whole and not (tmp_path / CHANGES).exists()
    again = SummaryCache(tmp_path, "v1")
    assert again.get("r21", "f21") == summary("r21") and again.get("r20", "f20") == summary("r20")
    assert again.get("r3", "f3") is None
