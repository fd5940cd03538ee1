"""Browsing a journal: runs filtered and sorted by column, knob and metric (typed, with close names on a typo); tags,
notes and archiving kept beside sealed runs; histories and comparisons keyed by configuration, not by a name that
several studies share; a site verdict older than the journal marked stale."""

import pytest
from typer.testing import CliRunner

from servebook.cli import app
from servebook.config import Plan
from servebook.config.slices import JournalSlice
from servebook.journal import Journal, samples
from servebook.journal.browse import browse
from servebook.journal.synthetic import write_synthetic_run
from servebook.present.site.identities import history_pages, stale_verdicts
from servebook.present.site.summary import RunSummary
from servebook.util.errors import InputError
from servebook.verdicts import compare_slices, history, judge

from .test_damaged_runs import journal_of, study  # noqa: F401 - the fixture


def test_filters_and_sorts_are_typed_and_a_typo_names_the_close_field(tmp_path):
    journal = Journal(tmp_path)
    runs = [write_synthetic_run(journal, index=i, requests=10, chunk_size=64 * (i + 1), speed=1 + i / 10)
            for i in range(4)]
    write_synthetic_run(journal, index=4, requests=0, status="failed", chunk_size=1024)
    frame = journal.index()
    chosen, extra = browse(frame, journal.run, ["knobs.chunk_size>=128"], "aggregate_tok_s:desc")
    # the failed run has the knob but no figure: it sorts last, and the columns used are shown
    assert list(chosen["run_id"]) == [runs[3].run_id, runs[2].run_id, runs[1].run_id, journal.run_ids()[-1]]
    assert extra == ["knobs.chunk_size", "aggregate_tok_s"]
    assert list(chosen["aggregate_tok_s"][:3]) == sorted(chosen["aggregate_tok_s"][:3], reverse=True)
    one_cell, _ = browse(frame, journal.run, ["prefill_tok_s@prefill-2048>0", "status=completed"], "knobs.chunk_size")
    assert list(one_cell["run_id"]) == [r.run_id for r in runs]
    for where, words in [(["knobs.chunk=64"], "did you mean 'knobs.chunk_size'"),
                         (["knobs.chunk_size=big"], "valid integer"),
                         (["status=complete"], "did you mean 'completed'"),
                         (["study=synthtic"], "did you mean 'synthetic'"),
                         (["aggregate_toks>1"], "did you mean 'aggregate_tok_s'"),
                         (["chunk_size 64"], "FIELD OP VALUE")]:
        with pytest.raises(InputError, match=words):
            browse(frame, journal.run, where)
    with pytest.raises(InputError, match="FIELD:desc"):
        browse(frame, journal.run, [], "aggregate_tok_s:down")


def test_tags_notes_and_archive_sit_beside_the_sealed_run_and_leave_it_out_of_verdicts(tmp_path, study):  # noqa: F811
    journal, baseline, variant = journal_of(tmp_path)
    sealed = {p: p.read_bytes() for p in variant[0].dir.rglob("*") if p.is_file()}
    journal.index(write=True)
    variant[0].annotate("tag", "warm")
    variant[0].annotate("tag", "pr-12")
    variant[0].annotate("untag", "pr-12")
    variant[0].annotate("note", "host rebooted before this run")
    variant[0].annotate("archive", "another job shared the GPU")
    assert {p: p.read_bytes() for p in sealed} == sealed  # the sealed files are as they were sealed
    shown = journal.run(variant[0].run_id).annotations
    assert shown.tags == ["warm"] and [n.text for n in shown.notes] == ["host rebooted before this run"]
    assert shown.archived == "another job shared the GPU"
    row = journal.index().set_index("run_id").loc[variant[0].run_id]  # the stored row was refreshed by the event
    assert (row["tags"], row["archived"]) == ("warm", "another job shared the GPU")
    tagged, _ = browse(journal.index(), journal.run, ["tags=warm"])
    assert list(tagged["run_id"]) == [variant[0].run_id]
    judged = {item.entry.name: item for item in judge(study, journal, append=False)}
    item = judged["bigger-chunks"]
    assert [r.run_id for r in item.records] == [r.run_id for r in variant[1:]]
    assert [r.run_id for r in item.left_out] == [variant[0].run_id]
    assert f"left out: run {variant[0].run_id} archived: another job shared the GPU" in item.verdict.reasons
    assert journal.find_all(variant[0].identity.candidate_id, variant[0].identity.plan_id) == variant[1:]
    assert history(journal, "bigger-chunks").runs == 2
    compared = compare_slices(journal, JournalSlice(candidate="baseline"), JournalSlice(candidate="bigger-chunks"))
    assert variant[0].run_id not in compared.runs_b
    variant[0].annotate("unarchive", "the other job was on another GPU after all")
    assert not journal.run(variant[0].run_id).archived
    assert len(judge(study, journal, append=False)[1].records) == 3


def test_the_cli_tags_notes_and_archives_and_ls_and_show_say_so(tmp_path, study):  # noqa: F811
    journal, _, variant = journal_of(tmp_path, runs=1)
    run_id, where = variant[0].run_id, ["--journal", str(journal.root)]
    runner = CliRunner(env={"COLUMNS": "200"})
    assert runner.invoke(app, ["journal", "tag", run_id[:20], "warm", *where]).exit_code == 0
    refused = runner.invoke(app, ["journal", "tag", run_id, "two words", *where])
    assert refused.exit_code == 2 and "no spaces" in refused.output
    assert runner.invoke(app, ["journal", "note", run_id, "slow disk", *where]).exit_code == 0
    unsaid = runner.invoke(app, ["journal", "archive", run_id, *where])
    assert unsaid.exit_code == 2 and "--why" in unsaid.output
    assert runner.invoke(app, ["journal", "archive", run_id, "--why", "noisy neighbour", *where]).exit_code == 0
    listed = runner.invoke(app, ["journal", "ls", "--where", "archived=true", *where])
    assert "completed (archived)" in listed.output and "warm" in listed.output and run_id[4:] in listed.output
    shown = runner.invoke(app, ["journal", "show", run_id, *where]).output
    assert "archived" in shown and "noisy neighbour" in shown and "tags: warm" in shown and "slow disk" in shown
    typo = runner.invoke(app, ["journal", "ls", "--status", "complete", *where])
    assert typo.exit_code == 2 and "did you mean 'completed'" in " ".join(typo.output.split())


def _two_studies(tmp_path, capacity_plan: Plan) -> Journal:
    journal = Journal(tmp_path)
    for i, (name, label, chunk) in enumerate([("demo", "baseline", 64), ("demo", "small", 32),
                                              ("capacity", "baseline", 512), ("demo", "baseline", 64)]):
        write_synthetic_run(journal, index=i, study=name, label=label, chunk_size=chunk, requests=10,
                            started_at=f"2026-01-0{i + 1}T00:00:00Z", plan=capacity_plan if name == "capacity" else None)
    return journal


def test_a_name_several_configurations_share_is_refused_with_the_configurations_it_names(tmp_path):
    journal = _two_studies(tmp_path, Plan(warmup_requests=5))
    capacity_plan = journal.index().set_index("study").loc["capacity", "plan_id"]
    with pytest.raises(InputError, match=r"'baseline' names 2 configurations: baseline under plan \w+ \(study "
                                         r"(demo|capacity); .*Say which: --study NAME or --plan PLAN"):
        history(journal, "baseline")
    # the newest run is demo's, then capacity's: either way the study decides which configuration, not the order
    assert history(journal, "baseline", study="demo").runs == 2
    assert history(journal, "baseline", study="capacity").study == "capacity"
    assert history(journal, "baseline", plan_id=capacity_plan).runs == 1
    candidate_id = journal.index().set_index("study").loc["capacity", "candidate_id"]
    assert history(journal, candidate_id[:8]).runs == 1  # an id prefix is one configuration
    with pytest.raises(InputError, match="add study=NAME or plan_id=PLAN to --a"):
        compare_slices(journal, JournalSlice(candidate="baseline"), JournalSlice(candidate="small"))
    found = compare_slices(journal, JournalSlice(candidate="baseline", study="demo"), JournalSlice(candidate="small"))
    assert len(found.runs_a) == 2
    refused = CliRunner().invoke(app, ["history", "baseline", "--journal", str(tmp_path)])
    assert refused.exit_code == 2 and "--study" in refused.output
    assert CliRunner().invoke(app, ["history", "baseline", "--study", "demo", "--journal", str(tmp_path)]).exit_code == 0


def test_a_name_measured_alike_by_several_studies_is_one_history(tmp_path):
    # a release gate's baseline (another study, another engine pin) measured with its qualification's plan continues
    # that configuration's history across the studies
    journal = _two_studies(tmp_path, Plan())
    assert history(journal, "baseline").runs == 3


def _summary(run_id, label, verdict_runs=None, baseline_runs=None, status="completed", archived=None):
    verdicts = [{"outcome": "accepted", "run_ids": verdict_runs, "baseline_run_ids": baseline_runs}] \
        if verdict_runs else []
    return RunSummary(run_id=run_id, label=label, study="demo", candidate_id=f"{label}-id", status=status,
                      plan_id="p", verdicts=verdicts, index_row={"archived": archived})


def test_site_history_pages_are_per_study_and_a_verdict_older_than_the_journal_is_marked_stale():
    runs = [_summary("r1", "baseline"), _summary("r2", "fast"), _summary("r3", "baseline"),
            _summary("r4", "fast", ["r2", "r4"], ["r1", "r3"])]
    assert stale_verdicts(runs, "baseline") == {}
    later = runs + [_summary("r5", "fast")]
    assert "judged 2 of its runs and 2 of the baseline's; the journal holds 3 and 2 now" in \
        stale_verdicts(later, "baseline")["fast"]
    archived = runs + [_summary("r5", "fast", archived="bad host")]  # an archived run is no evidence: not stale
    assert stale_verdicts(archived, "baseline") == {}
    other = [runs[0].model_copy(update={"run_id": "r0", "study": "capacity", "plan_id": "q"}),
             runs[0].model_copy(update={"run_id": "r6", "study": "capacity-gate", "plan_id": "q"})]
    pages = history_pages(runs + other)
    assert set(pages) == {("p", "baseline"), ("p", "fast"), ("q", "baseline")}
    assert [s.run_id for s in pages[("p", "baseline")][1]] == ["r1", "r3"]
    # each page is named by the study that first measured the configuration, so the two baselines' pages differ
    assert (pages[("p", "baseline")][0], pages[("q", "baseline")][0]) == ("demo--baseline", "capacity--baseline")
    assert [s.run_id for s in pages[("q", "baseline")][1]] == ["r0", "r6"]


def test_journal_show_sets_several_runs_side_by_side():

    journal = samples.sample_journal("sample-journal-vllm-sliced")
    runs = ["20261203T070134Z-8afc0ca4", "20261203T070134Z-53f11049", "20261203T070134Z-8c57ab0c.1"]
    shown = CliRunner().invoke(app, ["journal", "show", *runs, "--journal", str(journal)], env={"COLUMNS": "160"})
    assert shown.exit_code == 0, shown.output
    assert "3 runs compared" in shown.output and "Knobs that differ" in shown.output
    header = next(line for line in shown.output.splitlines() if "cell" in line and "baseline" in line)
    assert "chunk-2048" in header and "kv-fp8" in header
    assert "knobs.chunk_size" in shown.output and "2048" in shown.output
