"""vLLM 0.26.0 as it answered on an H200 (tests/fixtures/vllm-0.26.0, recorded 2026-12-02 by tools/gpu-host/gpu-host.sh):
the settings it reports back, and the failures it was provoked into, each classified from its own log."""

import json
import shutil
from pathlib import Path

import pytest

from servebook.config import load_study
from servebook.engines import get_engine
from servebook.journal import samples
from servebook.launch.verify import SelfReport, verify_claims
from servebook.models.random_models import model_file_name
from servebook.util.paths import repo_data_dir
from tests.helpers.recorded_logs import failure_from_log

RECORDED = Path(__file__).parents[2] / "fixtures" / "vllm-0.26.0"
STUDY = repo_data_dir() / "studies" / "h200-vllm-1b.yaml"
VLLM = get_engine("vllm")


def entries():
    return {entry.name: entry.candidate for entry in load_study(STUDY).expand()}


@pytest.mark.parametrize("name", ["baseline", "seqs-8", "chunk-2048", "ngram", "draft-model", "kv-fp8",
                                  "no-prefix-cache"])
def test_every_knob_of_the_study_is_read_back_from_the_live_server_and_verified(name):
    bodies = json.loads((RECORDED / f"self-report-{name}.json").read_text())
    settings = VLLM.reported_settings(bodies)
    candidate = entries()[name]
    report = SelfReport([m["id"] for m in bodies["/v1/models"]["data"]], settings)
    found, wrong = verify_claims(candidate, report, model_file_name(candidate.model.path, VLLM.model_format))
    assert wrong == [], wrong
    # the checkpoint was written under another cache on the GPU host: the same directory name is the same model
    assert found["model"].status == "verified"
    for knob in ("max_running_requests", "chunk_size", "context_length", "drafter"):
        assert found[f"knobs.{knob}"].status == "verified", (knob, found)
    knobs = candidate.knobs
    if knobs.kv_dtype:
        assert (found["knobs.kv_dtype"].status, found["knobs.kv_dtype"].value) == ("verified", knobs.kv_dtype)
    if knobs.prefix_caching is not None:
        assert found["knobs.prefix_caching"].value is False and settings["prefix_caching"] is False
    assert settings["drafter_active"] == (knobs.drafter.kind != "none")
    assert settings.get("drafter_method") == (None if knobs.drafter.kind == "none" else knobs.drafter.kind)
    # the KV pool fills 0.92 of the H200's 143,771 MiB less the weights: 32 KiB per token of the 1B shape, 16 KiB
    # with an 8-bit cache (twice the tokens), a little less beside a draft model
    per_token = 16 if knobs.kv_dtype == "fp8" else 32
    share = settings["kv_cache_tokens"] * per_token * 1024 / (0.92 * 143771 * 2**20)
    assert 0.9 < share < 1.0, share


def test_without_development_mode_the_cache_settings_still_come_from_the_metrics():
    bodies = json.loads((RECORDED / "self-report-kv-fp8.json").read_text())
    settings = VLLM.reported_settings({"/v1/models": bodies["/v1/models"], "/metrics": bodies["/metrics"]})
    assert settings["kv_dtype"] == "fp8" and settings["prefix_caching"] is True
    assert settings["drafter_active"] is False and "max_running_requests" not in settings
    drafting = json.loads((RECORDED / "self-report-ngram.json").read_text())
    assert VLLM.reported_settings({"/metrics": drafting["/metrics"]})["drafter_active"] is True


@pytest.mark.parametrize("name, cause, words", [
    ("refused-flag", "bad_flag", "argument --dtype: invalid choice: 'float8'"),
    ("missing-model", "model_load", "LocalEntryNotFoundError"),
    ("no-memory-at-start", "out_of_memory", "No available memory for the cache blocks"),
    ("kv-too-small", "out_of_memory", "larger than the available KV cache memory (0.06 GiB)"),
])
def test_each_provoked_failure_is_classified_from_the_engines_own_line(tmp_path, name, cause, words):
    failure, text = failure_from_log(RECORDED / f"engine-{name}.log", "vllm", ["vllm", "serve"], tmp_path)
    assert failure.cause == cause
    assert words in failure.message, failure.message
    # the reason is the engine's line, found far above the end of the log (vLLM's API server prints its own
    # traceback after the engine core's root cause)
    assert failure.message in text


def test_an_engine_killed_mid_cell_is_a_crash_not_a_diagnosis_from_its_log():
    diagnosis = VLLM.classify_failure((RECORDED / "engine-killed-mid-cell.log").read_text(), -9)
    assert diagnosis.cause == "crash" and diagnosis.message == "engine killed by signal 9"


def test_the_live_server_exports_what_the_contract_recorded_from_the_installed_package(tmp_path):
    """/metrics before and after every cell of the H200 runs, /v1/models and /version, against
    data/engine-contracts/vllm-0.26.0.json (recorded from the same release's code, with no GPU)."""
    from servebook.engines.contracts import recorded_contracts
    from servebook.journal import Journal

    contract = recorded_contracts()[("vllm", "0.26.0")]
    shutil.copytree(samples.sample_journal("sample-journal-vllm"), tmp_path / "journal")
    seen: dict[str, set] = {}
    for record in Journal(tmp_path / "journal").runs():
        scrapes = record.table("scrapes")
        names = set()
        for name, labels in scrapes[["name", "labels"]].drop_duplicates().itertuples(index=False):
            if name.startswith("vllm:") and not name.endswith(("_created", "_bucket")):
                names.add(name)
                seen.setdefault(name, set()).add(tuple(sorted(k for k in json.loads(labels) if k != "le")))
        drafting = record.manifest.candidate["knobs"]["drafter"]["kind"] != "none"
        # the speculative counters exist exactly where a drafter is configured, as the contract says
        assert (set(contract.spec_only) <= names) == drafting and (not drafting) == names.isdisjoint(contract.spec_only)
        assert record.manifest.environment.engine_version == "0.26.0"  # /version
    # one difference, explained: vllm:cache_config_info is made at start from the live CacheConfig, whose fields
    # are its labels, so the contract (recorded with a stand-in config) cannot hold it; test_contracts holds the
    # simulator to the live labels instead
    assert set(seen) - {m.name for m in contract.metrics} == {"vllm:cache_config_info"}
    assert {m.name for m in contract.metrics} <= set(seen), "every metric the release defines was seen live"
    for name, labels in seen.items():
        if name != "vllm:cache_config_info":
            assert labels == {tuple(sorted(contract.metric(name).labels))}, name
    models = json.loads((RECORDED / "self-report-baseline.json").read_text())["/v1/models"]["data"][0]
    assert sorted(models) == sorted(contract.server_info_fields)


def test_a_kernel_compiled_after_warm_up_is_caught_by_vllms_own_jit_monitor():
    # the warning vLLM 0.26's jit_monitor logs once per kernel compiled after its warm-up (its message, filled in)
    line = ("(EngineCore pid=1141) WARNING 12-02 06:01:02 [jit_monitor.py:135] Triton kernel JIT compilation during "
            "inference: _topk_topp_kernel. This causes a latency spike; consider extending warmup to cover this "
            "shape/config.")
    assert VLLM.compile_pattern.search(line)
    # the monitor's own start line and the startup compile lines that precede it are not inside any cell
    started = (RECORDED / "engine-killed-mid-cell.log").read_text().splitlines()
    after_warm_up = started[next(i for i, text in enumerate(started) if "Kernel JIT monitor activated" in text) + 1:]
    assert not [text for text in after_warm_up if VLLM.compile_pattern.search(text)]
