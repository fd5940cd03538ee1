"""servebook's SGLang and vLLM adapters, its simulator and its studies against the contracts recorded from the
released engines' own code (data/engine-contracts, written by scripts/record-engine-contracts.sh)."""

import asyncio
import json

import pytest

from servebook.engines import get_engine
from servebook.engines.contracts import recorded_contracts
from servebook.engines.counters import parse_metrics
from servebook.engines.sglang import REPORTED_FIELDS
from servebook.simulator.config import parse_engine_argv
from servebook.simulator.engine import Engine
from servebook.util.paths import repo_data_dir

PINNED = {"sglang": "0.5.23", "vllm": "0.33.0"}


def contract(engine):
    return recorded_contracts()[(engine, PINNED[engine])]


@pytest.mark.parametrize("engine", sorted(PINNED))
def test_the_pinned_releases_are_recorded(engine):
    c = contract(engine)
    assert c.flags and c.metrics and c.server_info_fields


def test_sglang_kv_dtypes_are_the_parsers_choices():
    assert sorted(get_engine("sglang").knobs_model.kv_types) == sorted(contract("sglang").flag("--kv-cache-dtype").choices)


def test_vllm_kv_dtypes_are_its_cache_dtypes():
    assert sorted(get_engine("vllm").knobs_model.kv_types) == sorted(contract("vllm").cache_dtypes)


@pytest.mark.parametrize("engine", sorted(PINNED))
def test_every_owned_flag_exists_with_all_its_aliases_owned(engine):
    adapter, c = get_engine(engine), contract(engine)
    owned = {flag for flags in adapter.owned.values() for flag in flags}
    for knob, flags in adapter.owned.items():
        for flag in flags:
            recorded = c.flag(flag)
            if recorded is None:
                continue  # an older spelling kept so that an extra_arg written for an older release is refused too
            missing = set(recorded.options) - owned
            assert not missing, f"{engine} {flag} ({knob}) has aliases an extra_arg could set: {missing}"
    # the flags servebook passes itself all exist
    for flag in adapter.argv(_candidate(engine), port=1, model_path="m", draft_path=None):
        if flag.startswith("-"):
            assert c.flag(flag) is not None, f"{engine} has no flag {flag}"


@pytest.mark.parametrize("engine", sorted(PINNED))
def test_the_parsers_own_prefix_and_underscore_rules_are_the_adapters(engine):
    adapter, c = get_engine(engine), contract(engine)
    assert adapter.flag_prefixes == c.allow_abbrev and adapter.flag_underscores == c.underscores


def _candidate(engine, **knobs):
    from tests.helpers.candidates import make_candidate

    return make_candidate(engine, knobs={"max_running_requests": 4, "chunk_size": 2048, **knobs})


def fresh_server_scrape(engine, drafter: bool = False) -> str:
    """/metrics of a freshly started server, from the contract: every sample that exists at start, at 0."""
    c, lines = contract(engine), []
    for m in c.metrics:
        if not m.at_start or (not drafter and m.name in c.spec_only):
            continue
        lines.append(f"{m.name}{{{_labels(m, '0')}}} 0")
    return "\n".join(lines) + "\n"


def _labels(metric, value: str) -> str:
    return ",".join(f'{name}="{value}"' for name in metric.labels)


@pytest.mark.parametrize("engine", sorted(PINNED))
def test_the_counters_servebook_reads_exist_in_the_release(engine):
    assert not set(COUNTERS_READ[engine]) - {m.name for m in contract(engine).metrics}


#: the counters the reconciliation and the drafter's evidence read
COUNTERS_READ = {
    "sglang": ["sglang:prompt_tokens_total", "sglang:cached_tokens_total", "sglang:generation_tokens_total",
               "sglang:spec_verify_calls_total"],
    "vllm": ["vllm:prompt_tokens_total", "vllm:prompt_tokens_cached_total", "vllm:generation_tokens_total",
             "vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_accepted_tokens_total",
             "vllm:request_queue_time_seconds_sum", "vllm:request_prefill_time_seconds_sum"]}


@pytest.mark.parametrize("engine,version", sorted(recorded_contracts()))
def test_every_recorded_release_has_the_counters_and_server_info_servebook_reads(engine, version):
    """The releases studies pin for the lent H200 (SGLang 0.5.17, vLLM 0.26.0: the newest whose pins its torch
    satisfies) as much as the newest ones the adapters were checked against."""
    recorded = recorded_contracts()[(engine, version)]
    assert not set(COUNTERS_READ[engine]) - {m.name for m in recorded.metrics}
    if engine == "sglang":
        assert set(REPORTED_FIELDS) <= set(recorded.server_info_fields)


@pytest.mark.parametrize("engine", sorted(PINNED))
def test_a_cold_first_cell_reconciles_on_the_release_s_counters(engine):
    """Between a fresh server and its first request, every count servebook checks is a number, not 'absent'."""
    c = contract(engine)
    before = parse_metrics(fresh_server_scrape(engine))
    prompt = next(m for m in c.metrics if m.name == f"{engine}:prompt_tokens_total")
    generated = next(m for m in c.metrics if m.name == f"{engine}:generation_tokens_total")
    after_text = fresh_server_scrape(engine) + "".join(
        f"{m.name}{{{_labels(m, '1')}}} {v}\n" for m, v in ((prompt, 400), (generated, 64)))
    counts = get_engine(engine).server_counts(before, parse_metrics(after_text))
    assert (counts.prompt_tokens, counts.cached_tokens, counts.generation_tokens) == (400, 0, 64)


def simulator_metrics(engine, *argv) -> set[tuple[str, tuple[str, ...]]]:
    config = parse_engine_argv(engine, ["--port", "1", "--enable-metrics", *argv], set())
    engine_ = Engine(config)
    # the client library's own _created and _bucket series are not the engine's (the contract records _sum/_count)
    return {(s.name, tuple(sorted(k for k, _ in s.labels if k != "le")))
            for s in parse_metrics(engine_.counters.render()).samples if not s.name.endswith(("_created", "_bucket"))}


@pytest.mark.parametrize("engine", sorted(PINNED))
def test_the_simulator_labels_and_creates_counters_as_the_release_does(engine):
    c = contract(engine)
    exported = simulator_metrics(engine)
    for name, labels in exported:
        if name == "vllm:cache_config_info":
            continue  # its labels are a live configuration's fields: held to the H200 recording below
        recorded = c.metric(name)
        assert recorded is not None, f"the simulator exports {name}, which {engine} {c.version} does not"
        assert labels == tuple(sorted(recorded.labels)), name
        assert recorded.at_start, f"the simulator exports {name} at start; {engine} creates it at first use"


def test_the_simulated_vllm_publishes_its_cache_settings_as_the_live_engine_did():
    from pathlib import Path

    recorded = json.loads((Path(__file__).parents[2] / "fixtures" / "vllm-0.26.0" / "self-report-kv-fp8.json")
                          .read_text())["/metrics"]
    live = next(dict(s.labels) for s in parse_metrics(recorded).samples if s.name == "vllm:cache_config_info")
    engine = Engine(parse_engine_argv("vllm", ["--port", "1", "--kv-cache-dtype", "fp8"], set()))
    simulated = next(dict(s.labels) for s in parse_metrics(engine.counters.render()).samples
                     if s.name == "vllm:cache_config_info")
    assert set(simulated) <= set(live)
    assert simulated["cache_dtype"] == live["cache_dtype"] == "fp8"
    assert simulated["enable_prefix_caching"] == live["enable_prefix_caching"] == "True"


def test_the_simulated_sglang_creates_its_cached_and_verify_counters_at_first_use():
    config = parse_engine_argv("sglang", ["--port", "1", "--enable-metrics", "--speculative-algorithm", "NEXTN"],
                               set())
    engine = Engine(config)
    names = lambda: {s.name for s in parse_metrics(engine.counters.render()).samples}  # noqa: E731
    assert "sglang:cached_tokens_total" not in names() and "sglang:spec_verify_calls_total" not in names()

    async def two_requests():
        engine.ready = True
        for _ in range(2):
            async for _ in engine.generate(list(range(100, 140)), 8, True, 8):
                pass

    asyncio.run(two_requests())
    assert {"sglang:cached_tokens_total", "sglang:spec_verify_calls_total"} <= names()


def test_the_simulated_vllm_exports_speculative_counters_only_with_a_drafter():
    plain = {n for n, _ in simulator_metrics("vllm")}
    drafting = {n for n, _ in simulator_metrics("vllm", "--speculative-config", '{"method":"mtp"}')}
    assert "vllm:spec_decode_num_draft_tokens_total" not in plain
    assert "vllm:spec_decode_num_draft_tokens_total" in drafting


def test_the_server_info_fields_servebook_reads_exist():
    assert set(REPORTED_FIELDS) | {"speculative_algorithm", "internal_states"} <= set(
        contract("sglang").server_info_fields)
    assert {"root", "max_model_len", "id"} <= set(contract("vllm").server_info_fields)


@pytest.mark.parametrize("engine", sorted(PINNED))
def test_every_study_dry_run_line_was_parsed_by_the_real_parser(engine):
    """The recorded parse must be of today's lines: a changed study or adapter needs a fresh recording."""
    import subprocess
    import sys


    root = repo_data_dir().parent
    studies = sorted(str(p) for p in (root / "data" / "studies").glob("*.yaml"))
    out = subprocess.run([sys.executable, str(root / "scripts" / "dry_run_lines.py"), *studies],
                         capture_output=True, text=True, check=True, cwd=root)
    today = json.loads(out.stdout).get(engine, {})
    assert today, f"no study runs {engine}"
    from pathlib import Path

    from servebook.config.loading import load_study

    # a study pinned to a recorded release is held to that release's parser, the others to the newest recorded
    pinned = {s.name: s.expand()[0].candidate.pins.engine_version for s in map(load_study, map(Path, studies))}
    for study, lines in today.items():
        recorded = recorded_contracts().get((engine, str(pinned.get(study))), contract(engine)).dry_runs
        # the parser sees only the argv: a line recorded under another study is the same parse
        by_argv = {json.dumps(e["argv"]): e for entries in recorded.values() for e in entries.values()}
        for name, argv in lines.items():
            entry = recorded.get(study, {}).get(name) or by_argv.get(json.dumps(argv))
            assert entry is not None and entry["argv"] == argv, (
                f"{study}/{name}: this line was not parsed by {engine}'s real parser; "
                "run scripts/record-engine-contracts.sh")
            if (study, name) in (("h200-vllm-failures", "baseline"), ("h200-sglang-failures", "baseline")):
                # the study's refused flag, provoked on purpose: the real parser must refuse it (as vLLM did live)
                assert "invalid choice: 'float8'" in entry["parsed"], entry["parsed"]
                continue
            assert entry["parsed"] == "ok", f"{study}/{name}: {entry['parsed']}"


def test_a_pinned_release_refuses_an_extra_arg_its_parser_does_not_know():
    from pydantic import ValidationError

    from tests.helpers.candidates import make_candidate

    with pytest.raises(ValidationError, match="--max-num-seq-s is not a flag of vllm 0.33.0"):
        make_candidate("vllm", pins={"engine_version": "0.33.0"}, extra_args=["--max-num-seq-s", "8"])
    with pytest.raises(ValidationError, match="reads it as --max-num-batched-tokens"):
        make_candidate("vllm", pins={"engine_version": "0.33.0"}, extra_args=["--max-num-batched", "8"])
    make_candidate("vllm", pins={"engine_version": "0.33.0"}, extra_args=["--dtype", "bfloat16"])


def test_the_simulator_s_own_settings_pass_a_pinned_release():
    from tests.helpers.candidates import make_candidate

    make_candidate("vllm", pins={"engine_version": "0.33.0"}, launch={"simulator": True},
                   extra_args=["--sim-slowdown", "1.1"])
