import pytest

from servebook.config import Candidate
from servebook.engines import get_engine


def argv_for(knobs, extra_args=()):
    candidate = Candidate.model_validate({"model": {"path": "m.gguf"}, "knobs": knobs, "extra_args": list(extra_args)})
    argv = get_engine("llamacpp").argv(candidate, port=8123, model_path="/models/m.gguf", draft_path="/models/d.gguf")
    return argv


def flag_value(argv, flag):
    return argv[argv.index(flag) + 1]


def test_base_flags_are_always_set():
    argv = argv_for({})
    assert flag_value(argv, "-m") == "/models/m.gguf"
    assert flag_value(argv, "--host") == "127.0.0.1"
    assert flag_value(argv, "--port") == "8123"
    assert "--metrics" in argv
    for absent in ("-np", "-b", "-ub", "-c", "--spec-type", "-ctk"):
        assert absent not in argv


def test_knobs_map_to_llama_server_flags():
    argv = argv_for({"chunk_size": 256, "max_running_requests": 3, "context_length": 12288, "kv_dtype": "q8_0"})
    assert flag_value(argv, "-b") == "256" and flag_value(argv, "-ub") == "256"
    assert flag_value(argv, "-np") == "3"
    assert flag_value(argv, "-c") == "12288"
    assert flag_value(argv, "-ctk") == "q8_0" and flag_value(argv, "-ctv") == "q8_0"


def test_draft_model_with_synthetic_acceptance():
    argv = argv_for({"drafter": {"kind": "draft_model", "model": "tiny:draft", "max_draft_tokens": 4,
                                 "synthetic_length": 3, "synthetic_rates": [0.9, 0.5]}})
    assert flag_value(argv, "--spec-type") == "draft-simple"
    assert flag_value(argv, "-md") == "/models/d.gguf"
    assert flag_value(argv, "--spec-draft-n-max") == "4"
    assert flag_value(argv, "--spec-synth-len") == "3"
    assert flag_value(argv, "--spec-synth-rates") == "0.9,0.5"


@pytest.mark.parametrize("ngram_type", ["ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache"])
def test_each_of_llama_cpps_ngram_drafters_is_its_own_spec_type_at_its_own_defaults(ngram_type):
    argv = argv_for({"drafter": {"kind": "ngram", "ngram_type": ngram_type}})
    assert flag_value(argv, "--spec-type") == ngram_type
    assert not any(a.startswith("--spec-ngram") for a in argv)


def test_a_draft_length_is_refused_where_llama_cpp_drafts_its_own():
    # 0.3.36: ngram-simple told to draft 8 tokens drafted none on Gemma 3 270M; its default drafted 70 of 70 accepted
    with pytest.raises(ValueError, match="leave it unset"):
        argv_for({"drafter": {"kind": "ngram", "ngram_type": "ngram-simple", "max_draft_tokens": 8}})
    with pytest.raises(ValueError, match="needs kind ngram"):
        argv_for({"drafter": {"kind": "draft_model", "model": "d.gguf", "ngram_type": "ngram-simple"}})


def test_ngram_drafter_has_no_model():
    argv = get_engine("llamacpp").argv(
        Candidate.model_validate({"model": {"path": "m.gguf"}, "knobs": {"drafter": {"kind": "ngram", "max_draft_tokens": 8}}}),
        port=1, model_path="m.gguf", draft_path=None)
    assert flag_value(argv, "--spec-type") == "ngram-mod"
    assert flag_value(argv, "--spec-ngram-mod-n-max") == "8"
    assert flag_value(argv, "--spec-ngram-mod-n-min") == "6"
    assert "-md" not in argv and "--spec-draft-n-max" not in argv


def test_extra_args_come_last_and_verbatim():
    argv = argv_for({}, ["--threads", "2", "--no-webui"])
    assert argv[-3:] == ["--threads", "2", "--no-webui"]


def test_the_prompt_cache_is_a_knob_owned_by_llamacpp():
    from servebook.engines import get_engine
    from tests.helpers.candidates import tiny_candidate

    argv = get_engine("llamacpp").argv(tiny_candidate(knobs={"prompt_cache_mib": 0}), port=8123,
                                       model_path="/m.gguf", draft_path=None)
    assert argv[argv.index("--cache-ram") + 1] == "0"
    with pytest.raises(ValueError, match="conflicts with knobs.prompt_cache_mib"):
        tiny_candidate(extra_args=["--cache-ram", "0"])
    base = tiny_candidate()
    assert tiny_candidate(knobs={"prompt_cache_mib": 0}).id != base.id
    assert "prompt_cache_mib" not in base.canonical_json(), "unset, it leaves every recorded id as it was"
