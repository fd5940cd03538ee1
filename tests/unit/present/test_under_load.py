"""Latency under load as the site and notebooks show it: the ITL, probe and gauge tables, the probes' chunk gaps
apart from the decode cells' ITL distribution, and the engine's gauges on the run's time axis."""

import pandas as pd
import pytest

from servebook.journal import Journal, Manifest
from servebook.present.figures import chunk_gap_histogram_data, run_figures
from servebook.present.load_figures import gauge_data, gauge_spec, probe_gap_data
from servebook.present.load_tables import cell_tables
from servebook.present.site.pages import sections, summarize_run
from servebook.present.site.summary import RunSummary
from servebook.present.under_load import gauge_table, itl_table, probe_table

DECODE = {"cell_id": "decode-prose-c2", "kind": "decode", "category": "prose", "concurrency": 2, "valid": True,
          "aggregate_tok_s": 120.0,
          "reconciliation": "ok", "invalid_reasons": "", "itl_p50_s": 0.01, "itl_p95_s": 0.02, "itl_p99_s": 0.031,
          "itl_max_s": 0.2, "itl_tokens_per_chunk": 1.0, "itl_token_p50_s": 0.01, "itl_token_p99_s": 0.031,
          "kv_usage_peak": 0.42, "running_peak": 2.0, "waiting_peak": 1.0, "preemptions": 0.0, "gauge_samples": 3}
PREFILL = {"cell_id": "prefill-1024", "kind": "prefill", "category": "prose", "concurrency": 1,
           "target_prompt_tokens": 1024, "prefill_tok_s": 900.0, "valid": True, "reconciliation": "ok", "invalid_reasons": "",
           "probe_requests": 2, "probe_ttft_p50_s": 0.3, "probe_ttft_p95_s": 0.9, "probe_itl_p50_s": 0.01,
           "probe_itl_p95_s": 0.5, "probe_itl_p99_s": 0.7, "probe_itl_max_s": 0.75, "kv_usage_peak": None,
           "running_peak": 2.0, "waiting_peak": 0.0, "preemptions": None, "gauge_samples": 2}


def request(rid, cell, probe=False):
    return {"request_id": rid, "cell_id": cell, "error": None, "probe": probe, "t_send": 0.0, "t_first": 0.5,
            "t_last": 1.0, "prompt_tokens": 64, "completion_tokens": 3}


def chunk(rid, cell, gap):
    return {"request_id": rid, "cell_id": cell, "index": 1, "t": 1.0, "gap_s": gap, "tokens": None}


def gauge(cell, t, name, value):
    return {"cell_id": cell, "t": t, "name": name, "value": value}


@pytest.fixture
def run(tmp_path):
    journal = Journal(tmp_path)
    writer = journal.start_run("abcdef123456")
    writer.write_table("cells", pd.DataFrame([DECODE, PREFILL]))
    writer.write_table("requests", [request("d-0", "decode-prose-c2"), request("p-0", "prefill-1024"),
                                    request("p-probe-0", "prefill-1024", probe=True)])
    writer.write_table("chunks", [chunk("d-0", "decode-prose-c2", 0.010), chunk("d-0", "decode-prose-c2", 0.012),
                                  chunk("p-probe-0", "prefill-1024", 0.75), chunk("p-probe-0", "prefill-1024", 0.01)])
    writer.write_table("gauges", [
        gauge("decode-prose-c2", 100.0, "running", 1), gauge("decode-prose-c2", 100.0, "kv_usage", 0.1),
        gauge("decode-prose-c2", 100.0, "preemptions", 4), gauge("decode-prose-c2", 100.25, "running", 2),
        gauge("decode-prose-c2", 100.25, "kv_usage", 0.42), gauge("decode-prose-c2", 100.25, "preemptions", 5),
        gauge("prefill-1024", 101.0, "running", 2), gauge("prefill-1024", 101.5, "running", 1)])
    writer.seal(Manifest(status="completed", candidate_id="abcdef123456", plan_id="0123456789ab"))
    return journal.run(writer.run_id)


def test_the_tables_take_the_cells_that_carry_their_figures():
    assert itl_table([DECODE, PREFILL]).rows[0].values[1:6] == ["2", "10.0", "20.0", "31.0", "200.0"]
    assert probe_table([DECODE, PREFILL]).rows[0].values == ["prefill-1024", "1024", "2", "300.0", "900.0", "10.0",
                                                             "700.0", "750.0"]
    gauges = gauge_table([DECODE, PREFILL])
    assert gauges.rows[0].values == ["decode-prose-c2", "42%", "2", "1", "0", "3"]
    assert gauges.rows[1].values == ["prefill-1024", "-", "2", "0", "-", "2"]
    # a run recorded before these figures has none of these tables
    old = {"cell_id": "decode-prose-c1", "kind": "decode", "valid": True}
    assert itl_table([old]) is None and probe_table([old]) is None and gauge_table([old]) is None
    titles = [t.title for t in cell_tables([DECODE, PREFILL])]
    assert titles[-3:] == ["Inter-token latency per decode cell (ms)",
                           "Decodes beside each prefill: the stall a prefill causes (ms)",
                           "The engine's own load during each cell"]
    assert any(s["title"].startswith("Latency under load") for s in sections(
        [RunSummary(run_id="r", status="completed", label="a", cells=[DECODE, PREFILL])]))


def test_the_probes_gaps_are_kept_apart_from_the_decode_cells_itl_distribution(run):
    decode = chunk_gap_histogram_data(run)
    probes = probe_gap_data(run)
    assert sum(decode["counts"]) == 2 and decode["edges"][0] <= 10.0 <= decode["edges"][-1]
    assert sum(probes["counts"]) == 2 and probes["edges"][-1] >= 750.0


def test_the_gauges_on_the_runs_time_axis(run):
    data = gauge_data(run)
    assert data["cells"] == [{"cell_id": "decode-prose-c2", "start": 0.0, "end": 0.25},
                             {"cell_id": "prefill-1024", "start": 1.0, "end": 1.5}]
    assert data["series"]["kv_usage"]["v"] == [10.0, 42.0]  # percent
    assert data["series"]["preemptions"]["v"] == [0.0, 1.0]  # since the run's first sample
    assert data["series"]["running"]["cell"] == [0, 0, 1, 1]
    spec = gauge_spec(data)
    names = {t["name"]: t for t in spec["data"]}
    assert set(names) == {"running requests", "KV cache in use (%)", "preemptions so far"}
    assert names["KV cache in use (%)"]["yaxis"] == "y2" and names["running requests"]["yaxis"] == "y"
    assert [s["x0"] for s in spec["layout"]["shapes"]] == [0.0, 1.0]
    assert names["running requests"]["customdata"][2] == "prefill-1024"


def test_one_runs_figures_include_its_gauges_and_a_summary_keeps_them(run):
    titles = [f.layout.title.text.replace("<br>", " ") for f in run_figures([run])]
    assert any("load during the run" in t for t in titles)
    assert any("beside each prefill" in t for t in titles)
    assert any("ITL p99" in t for t in titles)
    summary = summarize_run(run)
    assert summary.gauges["series"] and sum(summary.probe_gaps["counts"]) == 2
    assert RunSummary.model_validate_json(summary.model_dump_json(fallback=str)) == summary


def test_a_run_without_gauges_loads_as_before(tmp_path):
    journal = Journal(tmp_path)
    writer = journal.start_run("abcdef123456")
    writer.write_table("cells", pd.DataFrame([{**DECODE, "gauge_samples": None}]))
    writer.seal(Manifest(status="completed", candidate_id="abcdef123456", plan_id="0123456789ab"))
    record = journal.run(writer.run_id)
    assert gauge_data(record) == {} and probe_gap_data(record) == {"edges": [], "counts": []}
    assert not any("load during the run" in f.layout.title.text.replace("<br>", " ") for f in run_figures([record]))
