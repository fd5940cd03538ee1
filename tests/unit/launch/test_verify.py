"""Attach mode checks claims against the engine's self-report (recorded shapes of llama.cpp and SGLang)."""

import sys
import time
from types import SimpleNamespace

import pytest

from servebook.config.claims import Claim
from servebook.config.errors import InputError
from servebook.engines import get_engine
from servebook.launch.process import free_port
from servebook.launch.verify import NOT_VERIFIED, SelfReport, check_reachable, select_model, verify_claims
from servebook.present.claims import claim_text
from tests.helpers.candidates import make_candidate

# What llama-server 0.3.36 answered with -np 3 -c 4096 --alias tgt (recorded here).
LLAMA_PROPS = {"total_slots": 3, "model_alias": "tgt", "model_path": "/root/.cache/servebook/models/tiny-target-r1.gguf",
               "default_generation_settings": {"n_ctx": 1536}}
LLAMA_SLOTS = [{"id": i, "n_ctx": 1536, "speculative": False, "is_processing": False} for i in range(3)]


def llama_report():
    settings = get_engine("llamacpp").reported_settings({"/props": LLAMA_PROPS, "/slots": LLAMA_SLOTS})
    return SelfReport(["tgt"], settings)


def test_llamacpp_claims_are_verified_or_contradicted():
    ok = make_candidate(knobs={"max_running_requests": 3, "context_length": 4096, "chunk_size": 256})
    found, wrong = verify_claims(ok, llama_report(), "/elsewhere/tiny-target-r1.gguf")
    assert wrong == []
    assert found["model"].status == "verified" and found["knobs.max_running_requests"] == Claim(
        status="verified", value=3, source="self_report")
    assert found["knobs.context_length"].status == "verified" and found["knobs.drafter"].status == "verified"
    assert found["knobs.chunk_size"] == NOT_VERIFIED  # llama.cpp does not report its batch size
    liar = make_candidate(knobs={"max_running_requests": 8, "context_length": 32768})
    _, wrong = verify_claims(liar, llama_report(), "/models/other.gguf")
    assert len(wrong) == 3 and any("max_running_requests: the candidate says 8, the server reports 3" in w
                                   for w in wrong)


def test_sglang_reports_its_server_args():
    info = {"model_path": "org/model", "max_running_requests": 16, "chunked_prefill_size": 8192, "tp_size": 2,
            "context_length": 65536, "kv_cache_dtype": "fp8_e4m3", "speculative_algorithm": None}
    settings = get_engine("sglang").reported_settings({"/get_server_info": info})
    candidate = make_candidate("sglang", knobs={"max_running_requests": 16, "chunk_size": 4096,
                                                "tensor_parallel_size": 2})
    found, wrong = verify_claims(candidate, SelfReport(["org/model"], settings), None)
    assert wrong == ["knobs.chunk_size: the candidate says 4096, the server reports 8192"]
    assert (found["knobs.tensor_parallel_size"].status, found["knobs.tensor_parallel_size"].value) == ("verified", 2)
    assert (found["model"].status, found["model"].value) == ("verified", "org/model")


def test_served_name_selects_among_models_and_refuses_with_the_list():
    report = SelfReport(["big", "small"])
    assert select_model(report, "small", "http://x") == "small"
    with pytest.raises(InputError, match="serves 2 models \\(big, small\\); name the one"):
        select_model(report, None, "http://x")
    with pytest.raises(InputError, match="does not serve 'tiny'; it offers big, small"):
        select_model(report, "tiny", "http://x")
    assert select_model(SelfReport(["only"]), None, "http://x") == "only"


def test_a_closed_port_or_a_bad_url_fails_at_once():
    started = time.monotonic()
    with pytest.raises(InputError, match="nothing answers"):
        check_reachable(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(InputError, match="not an http"):
        check_reachable("127.0.0.1:8080")
    assert time.monotonic() - started < 5


def test_a_url_without_scheme_is_refused_at_load():
    with pytest.raises(ValueError, match="not an http\\(s\\) URL"):
        make_candidate(launch={"mode": "attach", "url": "localhost:8080"})


def test_a_launched_engine_s_unreported_setting_shows_the_flag_servebook_passed():
    from servebook.launch.verify import launched_claims

    candidate = make_candidate(knobs={"max_running_requests": 3, "context_length": 4096, "chunk_size": 256})
    adapter = get_engine("llamacpp")
    argv = adapter.argv(candidate, port=8080, model_path="/m/tiny-target-r1.gguf", draft_path=None)
    found, _ = verify_claims(candidate, llama_report(), "/m/tiny-target-r1.gguf")
    shown = launched_claims(found, adapter, argv)
    assert shown["knobs.chunk_size"] == Claim(status="on_command_line", value="-b 256 -ub 256", source="command_line")
    assert claim_text(shown["knobs.chunk_size"]) == "set on the command line: -b 256 -ub 256 (the server does not report it)"
    assert shown["knobs.max_running_requests"].status == "verified"  # what the server reports stays verified


def test_the_simulator_standing_in_for_llamacpp_is_given_the_model_the_candidate_names():
    """The simulator runs as `python -m servebook.simulator ... -- llama-server -m MODEL`: python's own -m
    is not the model (read as one, the simulator's model was reported contradicted by its own name)."""
    from servebook.launch.target import local_argv
    from servebook.launch.verify import launched_claims
    from tests.helpers.candidates import simulated

    candidate, adapter = simulated("llamacpp"), get_engine("llamacpp")
    paths = SimpleNamespace(model_path="tiny:target", draft_path=None, backend=None, engine_binary=None)
    argv = local_argv(candidate, adapter, paths, None, 8080)
    assert argv[1:3] == ["-m", "servebook.simulator"]
    assert adapter.model_file(argv) == "tiny:target"
    # what the simulator reports in llama.cpp's /props shape: the -m it was given
    props = {"total_slots": 4, "model_path": "tiny:target", "model_alias": "tiny:target"}
    found, wrong = verify_claims(candidate, SelfReport(["tiny:target"], adapter.reported_settings({"/props": props})),
                                 adapter.model_file(argv))
    assert wrong == [] and found["model"] == Claim(status="verified", value="tiny:target", source="self_report")
    shown = launched_claims(found, adapter, argv)
    assert shown["knobs.max_running_requests"].status == "verified"


def test_a_run_recorded_before_the_simulator_left_engines_still_reads_its_engines_model():
    """Journals recorded before the move name `servebook.engines.simulator` in their argv: the engine's model is
    still read after the `--` (not python's own -m), so those runs are judged as they were."""
    argv = [sys.executable, "-m", "servebook.engines.simulator", "--flavor", "llamacpp", "--",
            "llama-server", "-m", "tiny:target", "--port", "8080"]
    assert get_engine("llamacpp").model_file(argv) == "tiny:target"
