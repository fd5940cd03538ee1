"""The 14 findings of the check of servebook's SGLang and vLLM adapters against SGLang 0.5.23 and vLLM 0.33.0
(docs/findings/2026-11-30-engines-checked.md): one test each, in the order of that file."""

import pytest
from pydantic import ValidationError

from servebook.engines import get_engine
from servebook.engines.counters import parse_metrics
from servebook.launch.preflight import other_engine_processes
from servebook.launch.verify import SelfReport, verify_claims
from tests.helpers.candidates import make_candidate


def argv(c):
    return get_engine(c.engine).argv(c, port=30000, model_path=c.model.id, draft_path=c.knobs.drafter.model)


def sglang_scrape(text: str):
    return parse_metrics("# HELP sglang:x x\n# TYPE sglang:x counter\n" + text)


LABELS = 'engine_type="unified",model_name="m"'


@pytest.mark.parametrize("dtype", ["bfloat16", "bf16", "mxfp8", "nvfp4", "fp4_mx_block16", "fp8_e4m3", "auto"])
def test_1_sglang_takes_every_kv_dtype_its_parser_takes(dtype):
    assert make_candidate("sglang", knobs={"kv_dtype": dtype}).knobs.kv_dtype == dtype


@pytest.mark.parametrize("dtype", ["fp16", "fp4_e2m1"])
def test_1_sglang_refuses_kv_dtypes_its_parser_rejects(dtype):
    with pytest.raises(ValidationError, match="kv_dtype"):
        make_candidate("sglang", knobs={"kv_dtype": dtype})


def test_2_vllm_takes_the_kv_dtype_seed_004_needs():
    c = make_candidate("vllm", knobs={"kv_dtype": "fp8_ds_mla"})
    assert argv(c)[argv(c).index("--kv-cache-dtype") + 1] == "fp8_ds_mla"
    for dtype in ("float16", "nvfp4_ds_mla", "nvfp4_4over6"):
        make_candidate("vllm", knobs={"kv_dtype": dtype})


def test_3_sglang_cold_cells_reconcile_cached_tokens_before_the_first_hit():
    adapter = get_engine("sglang")
    before = sglang_scrape(f'sglang:prompt_tokens_total{{{LABELS},is_streaming="false"}} 12\n')
    cold = sglang_scrape(f'sglang:prompt_tokens_total{{{LABELS},is_streaming="false"}} 12\n'
                         f'sglang:prompt_tokens_total{{{LABELS},is_streaming="true"}} 400\n')
    counts = adapter.server_counts(before, cold)
    assert counts.prompt_tokens == 400 and counts.cached_tokens == 0
    # the cell of the first hit: the counter exists only in the later scrape
    hit = sglang_scrape(f'sglang:prompt_tokens_total{{{LABELS},is_streaming="true"}} 800\n'
                        f'sglang:cached_tokens_total{{{LABELS},cache_source="device"}} 300\n')
    assert adapter.server_counts(cold, hit).cached_tokens == 300


def test_3_an_sglang_that_counts_nothing_is_not_read_as_zero():
    empty = parse_metrics("")
    assert get_engine("sglang").server_counts(empty, empty).cached_tokens is None


def test_4_a_silently_inactive_sglang_drafter_is_seen():
    adapter = get_engine("sglang")
    before = sglang_scrape(f'sglang:prompt_tokens_total{{{LABELS},is_streaming="false"}} 12\n')
    idle = sglang_scrape(f'sglang:prompt_tokens_total{{{LABELS},is_streaming="true"}} 400\n')
    assert adapter.server_counts(before, idle).drafted == 0
    busy = sglang_scrape(f'sglang:prompt_tokens_total{{{LABELS},is_streaming="true"}} 800\n'
                         f'sglang:spec_verify_calls_total{{{LABELS}}} 57\n')
    assert adapter.server_counts(idle, busy).drafted == 57


def test_5_dflash_records_only_what_sglang_runs():
    c = make_candidate("sglang", knobs={"drafter": {"kind": "dflash", "model": "org/dflash", "max_draft_tokens": 8}})
    args = argv(c)
    assert "--speculative-num-steps" not in args and "--speculative-eagle-topk" not in args
    assert args[args.index("--speculative-num-draft-tokens") + 1] == "8"
    with pytest.raises(ValidationError, match="DFLASH always runs num_steps 1"):
        make_candidate("sglang", knobs={"drafter": {"kind": "dflash", "model": "d", "num_steps": 3, "topk": 1,
                                                    "max_draft_tokens": 4}})


def test_5_eagle_top1_verifies_steps_plus_one():
    with pytest.raises(ValidationError, match="num_steps \\+ 1 = 4"):
        make_candidate("sglang", knobs={"drafter": {"kind": "eagle", "model": "e", "num_steps": 3, "topk": 1,
                                                    "max_draft_tokens": 8}})
    make_candidate("sglang", knobs={"drafter": {"kind": "eagle", "model": "e", "num_steps": 3, "topk": 4,
                                                "max_draft_tokens": 8}})


def test_6_vllm_kv_memory_failure_is_out_of_memory():
    line = ("ValueError: To serve at least one request with the models's max seq len (262144), (9.5 GiB KV cache is "
            "needed, which is larger than the available KV cache memory (2.25 GiB).")
    assert get_engine("vllm").classify_failure(line, 1).cause == "out_of_memory"


@pytest.mark.parametrize("line", ["Capture target decode CUDA graph begin. backend=full bs=[1, 2, 4]",
                                  "Capture prefill CUDA graph begin. This can take up to several minutes.",
                                  "Capture cuda graph begin. This can take up to several minutes."])
def test_7_sglang_compile_lines_of_0_5_23_and_before(line):
    assert get_engine("sglang").compile_pattern.search(line)


def sglang_report(**info):
    return SelfReport(["m"], get_engine("sglang").reported_settings({"/server_info": info}))


def test_8_a_claimed_auto_is_not_contradicted_by_what_sglang_resolved():
    c = make_candidate("sglang", knobs={"kv_dtype": "auto"})
    found, wrong = verify_claims(c, sglang_report(model_path="org/model", kv_cache_dtype="fp8_e4m3"), None)
    assert not wrong
    claim = found["knobs.kv_dtype"]
    assert claim.status == "not_verified" and claim.resolved_auto and claim.value == "fp8_e4m3" and not claim.checked


def test_8_sglang_says_when_the_scheduler_runs_fewer_requests_than_asked():
    c = make_candidate("sglang", knobs={"max_running_requests": 8})
    report = sglang_report(model_path="org/model", max_running_requests=8,
                           internal_states=[{"effective_max_running_requests_per_dp": 4}])
    found, wrong = verify_claims(c, report, None)
    assert not wrong and found["knobs.max_running_requests"].scheduler_limit == 4


def test_12_flag_aliases_cannot_override_a_knob():
    for engine, flag in (("vllm", "-sc"), ("sglang", "--model"), ("sglang", "--speculative-draft-model"),
                         ("sglang", "--speculative-dflash-block-size"), ("vllm", "--max_num_seqs")):
        with pytest.raises(ValidationError, match="conflicts with"):
            make_candidate(engine, extra_args=[flag, "x"])


def test_12_sglang_prefixes_are_read_as_the_flag_they_abbreviate():
    with pytest.raises(ValidationError, match="reads it as --chunked-prefill-size"):
        make_candidate("sglang", extra_args=["--chunked-prefill", "4096"])


def write_process(proc, pid, *argv):
    (proc / str(pid)).mkdir()
    (proc / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (proc / str(pid) / "stat").write_text(f"{pid} (x) S 1")


def test_13_preflight_knows_engines_by_their_entry_points_only(tmp_path):
    write_process(tmp_path, 11, "/usr/bin/python3", "/usr/local/bin/sglang", "serve", "--model-path", "m")
    write_process(tmp_path, 12, "/usr/local/bin/vllm", "serve", "org/model")
    write_process(tmp_path, 13, "/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server")
    write_process(tmp_path, 14, "/work/.venv/bin/python", "/work/.venv/bin/servebook", "sweep",
                  "data/studies/vllm-nvfp4-tp2.yaml")
    assert sorted(pid for pid, _ in other_engine_processes(tmp_path)) == [11, 12, 13]


def test_14_vllm_has_no_dead_metric_renames():
    import servebook.engines.vllm as vllm

    assert not hasattr(vllm, "RENAMES") and not hasattr(vllm, "metric")


def simulated(flavor, *argv):
    from starlette.testclient import TestClient

    from servebook.simulator.app import build_app
    from servebook.simulator.config import parse_engine_argv
    from servebook.simulator.engine import Engine

    engine = Engine(parse_engine_argv(flavor, ["--port", "1", *argv], set()))
    engine.ready = True
    return TestClient(build_app(engine))


def test_9_the_simulated_sglang_counters_are_labelled_and_lazy():
    client = simulated("sglang", "--enable-metrics")
    text = client.get("/metrics").text
    assert "sglang:cached_tokens_total{" not in text and "sglang:prompt_tokens_total{" not in text
    client.post("/v1/completions", json={"prompt": "one two three", "max_tokens": 2})
    assert 'sglang:prompt_tokens_total{engine_type="unified",is_streaming="false",model_name="model"}' in \
        client.get("/metrics").text


def usage_of(client, **extra):
    body = {"prompt": "one two three", "max_tokens": 2, **extra}
    return client.post("/v1/completions", json=body).json()["usage"]


def test_10_the_simulated_sglang_reports_as_sglang_does():
    client = simulated("sglang", "--model-path", "/models/glm", "--served-model-name", "glm")
    assert client.get("/v1/models").json()["data"][0]["root"] == "glm"
    info = client.get("/server_info").json()
    assert info["kv_cache_dtype"] == "bfloat16"  # `auto`, resolved
    assert info["internal_states"][0]["effective_max_running_requests_per_dp"] == 16
    assert "prompt_tokens_details" not in usage_of(client)
    # under --enable-cache-report, and then only when something was cached (usage_processor._details_if_cached):
    # a first prompt has nothing cached, the same prompt again has all but its last token
    reporting = simulated("sglang", "--enable-cache-report")
    assert "prompt_tokens_details" not in usage_of(reporting)
    assert usage_of(reporting)["prompt_tokens_details"]["cached_tokens"] > 0


def test_11_the_simulated_vllm_follows_its_usage_flags():
    assert "prompt_tokens_details" not in usage_of(simulated("vllm"))
    assert "prompt_tokens_details" in usage_of(simulated("vllm", "--enable-prompt-tokens-details"))
    with simulated("vllm", "--enable-force-include-usage").stream(
            "POST", "/v1/completions", json={"prompt": "a b", "max_tokens": 3, "stream": True}) as response:
        chunks = [line for line in response.iter_lines() if line.startswith("data: {")]
    assert all('"usage"' in chunk for chunk in chunks[:-1])  # usage on every chunk, unasked


def test_9_sglang_weights_that_fill_the_static_fraction_are_out_of_memory_not_a_signal():
    # seen on an H200 (2026-12-04, seven SGLang 0.5.17 engines started side by side at --mem-fraction-static 0.08):
    # the scheduler's ValueError, then SGLang's own SIGKILL of its process tree, once read as "killed by signal 9"
    tail = "\n".join([
        "[2026-12-04 20:26:41] Load weight end. elapsed=1.71 s, type=LlamaForCausalLM, dtype=torch.bfloat16",
        "[2026-12-04 20:26:41] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/tmp/sb-site/sglang/srt/managers/scheduler.py", line 3375, in run_scheduler_process',
        "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.08. Raise "
        "--mem-fraction-static above 0.161 (minimum viable = 1 - available/pre = 0.1603). If using speculative "
        "decoding, draft weights are now counted.",
        "[2026-12-04 20:26:41] Received sigquit from a child process. It usually means the child failed.",
    ])
    diagnosis = get_engine("sglang").classify_failure(tail, -9)
    assert diagnosis.cause == "out_of_memory"
    assert diagnosis.message.startswith("ValueError: Loaded weights leave no GPU memory for the KV cache")
