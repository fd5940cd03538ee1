import pytest
from pydantic import ValidationError

from servebook.config import Candidate, InputError, load_candidate
from tests.helpers.candidates import make_candidate


def make(**fields):
    return make_candidate(**fields)


def error_text(exc: pytest.ExceptionInfo) -> str:
    return str(exc.value)


def test_unknown_knob_names_the_field():
    with pytest.raises(ValidationError) as exc:
        make(knobs={"chunk_sise": 256})
    assert "chunk_sise" in error_text(exc)


def test_unknown_top_level_field_in_yaml_is_one_clear_message(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("engine: llamacpp\nmodel: {path: tiny:target}\nknobz: {}\n")
    with pytest.raises(InputError) as exc:
        load_candidate(path)
    message = error_text(exc)
    assert "knobz" in message and "unknown field" in message and str(path) in message


def test_wrong_type_names_the_field(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model: {path: tiny:target}\nknobs: {max_running_requests: four}\n")
    with pytest.raises(InputError) as exc:
        load_candidate(path)
    assert "knobs.max_running_requests" in error_text(exc)


def test_model_needs_exactly_one_source():
    with pytest.raises(ValidationError):
        make(model={})
    with pytest.raises(ValidationError):
        make(model={"path": "a.gguf", "id": "org/model"})


def test_drafter_consistency():
    with pytest.raises(ValidationError, match="needs drafter.model"):
        make(knobs={"drafter": {"kind": "draft_model"}})
    with pytest.raises(ValidationError, match="takes no other drafter settings"):
        make(knobs={"drafter": {"kind": "none", "max_draft_tokens": 4}})
    with pytest.raises(ValidationError, match=r"\[0, 1\]"):
        make(knobs={"drafter": {"kind": "draft_model", "model": "tiny:draft", "synthetic_rates": [1.5]}})
    with pytest.raises(ValidationError, match="only meaningful"):
        make(knobs={"drafter": {"kind": "ngram", "model": "tiny:draft"}})


def test_engine_specific_rejections():
    with pytest.raises(ValidationError, match="tensor_parallel_size"):
        make(knobs={"tensor_parallel_size": 2})
    with pytest.raises(ValidationError, match="kv_dtype"):
        make(knobs={"kv_dtype": "fp8_e4m3"})
    with pytest.raises(ValidationError, match="eagle3"):
        make(knobs={"drafter": {"kind": "eagle", "model": "x.gguf"}})


def test_extra_args_that_fight_a_knob_are_refused():
    with pytest.raises(ValidationError, match=r"-ub conflicts with knobs.chunk_size"):
        make(extra_args=["-ub", "256"])
    with pytest.raises(ValidationError, match=r"--parallel conflicts with knobs.max_running_requests"):
        make(extra_args=["--parallel=2"])
    with pytest.raises(ValidationError, match="servebook sets it"):
        make(extra_args=["--port", "9000"])
    assert make(extra_args=["--threads", "2"]).extra_args == ["--threads", "2"]


def test_identity_ignores_name_and_launch_but_not_knobs():
    a = make(name="a", knobs={"chunk_size": 256})
    b = make(name="b", knobs={"chunk_size": 256}, launch={"port": 9123, "ready_timeout_s": 5})
    c = make(name="a", knobs={"chunk_size": 512})
    assert a.id == b.id
    assert a.id != c.id
    assert len(a.id) == 12


def test_identity_is_stable_across_field_order():
    a = Candidate.model_validate({"model": {"path": "x.gguf"}, "knobs": {"chunk_size": 64, "max_running_requests": 2}})
    b = Candidate.model_validate({"knobs": {"max_running_requests": 2, "chunk_size": 64}, "model": {"path": "x.gguf"}})
    assert a.canonical_json() == b.canonical_json()


def test_overrides_are_validated_like_a_file():
    base = make(knobs={"chunk_size": 256})
    assert base.with_overrides({"knobs.chunk_size": 128}).knobs.chunk_size == 128
    assert base.with_overrides({"knobs.drafter.kind": "ngram"}).knobs.drafter.kind == "ngram"
    with pytest.raises(ValidationError, match="chunk_sise"):
        base.with_overrides({"knobs.chunk_sise": 128})


def test_identity_covers_what_the_engine_sees_and_keeps_recorded_ids():
    from pathlib import Path

    from servebook.journal import Journal

    base = make_candidate(knobs={"chunk_size": 512, "max_running_requests": 4, "context_length": 16384})
    assert make_candidate(knobs=base.knobs.model_dump(), launch={"env": {"OMP_NUM_THREADS": "1"}}).id != base.id
    assert make_candidate(knobs=base.knobs.model_dump(), launch={"gpus": [1]}).id != base.id
    moved = make_candidate(knobs=base.knobs.model_dump(), launch={"port": 9999, "ready_timeout_s": 30})
    assert moved.id == base.id  # port and timeouts are not the experiment
    # a run recorded by servebook 0.1.0 keeps its candidate id
    fixture = Journal(Path(__file__).parents[2] / "fixtures" / "journal-v0.1.0")
    completed = next(r for r in fixture.runs() if r.status == "completed")
    assert Candidate.model_validate(completed.manifest.candidate).id == completed.manifest.candidate_id


def test_a_literal_key_is_refused_and_points_to_api_key_env():
    for fields in ({"extra_args": ["--api-key", "sk-live-123"]}, {"extra_args": ["--admin-api-key=sk-1"]},
                   {"request_extras": {"api_key": "sk-1"}}):
        with pytest.raises(ValidationError, match="api_key_env"):
            make_candidate(**fields)
    with pytest.raises(ValidationError, match="api_key_env"):
        make_candidate(launch={"api_key_env": "not a name"})
    keyed = make_candidate(launch={"api_key_env": "SERVING_KEY"})
    assert keyed.id != make_candidate().id and "SERVING_KEY" not in keyed.canonical_json()
