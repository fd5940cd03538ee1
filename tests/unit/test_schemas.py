"""The JSON Schemas of a candidate, a plan and a study (issue 53, items 4 and 6): shipped in the package, equal to
what the models generate now, accepting every shipped input and the init templates, and refusing a misspelled field
where the loaders refuse it."""

import copy
import functools
import json
from pathlib import Path

import jsonschema
import pytest

import servebook.engines  # noqa: F401  (registers every engine's knobs)
from servebook.config import InputError, read_yaml, validate
from servebook.config.candidate import Candidate
from servebook.config.knobs import KNOB_MODELS
from servebook.config.loading import _check_override_paths, study_from_data
from servebook.config.plan import Plan
from servebook.config.schemas import KINDS, REGENERATE, dotted_fields, file_name, schema_texts, shipped_schema
from servebook.config.templates import TEMPLATES, render
from servebook.util.resources import shipped

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "data"


@functools.cache
def validator(kind: str) -> jsonschema.Draft202012Validator:
    schema = shipped_schema(kind)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def schema_errors(kind: str, data) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:300]}"
            for e in validator(kind).iter_errors(data)]


def load(kind: str, data) -> None:
    """What `servebook run` / `sweep` do with the parsed YAML of a `kind` file (InputError when they refuse it)."""
    if kind == "study":
        study_from_data(copy.deepcopy(data), "test")
    else:
        validate(KINDS[kind][0], copy.deepcopy(data), "test")


def test_the_shipped_schemas_are_the_ones_the_models_generate():
    for name, text in schema_texts().items():
        assert shipped("schemas", name).read_text(encoding="utf-8") == text, \
            f"lib/servebook/data/schemas/{name} is stale: run `{REGENERATE}`"
    assert sorted(p.name for p in shipped("schemas").iterdir()) == sorted(file_name(kind) for kind in KINDS)


def test_the_schemas_are_valid_json_schemas_that_name_every_engine():
    for kind in KINDS:
        jsonschema.Draft202012Validator.check_schema(shipped_schema(kind))
    candidate = shipped_schema("candidate")["$defs"]["Candidate"]
    assert candidate["properties"]["engine"]["enum"] == sorted(KNOB_MODELS)
    assert candidate["additionalProperties"] is False


def _shipped(kind: str) -> list[Path]:
    folder = {"candidate": "candidates", "plan": "plans", "study": "studies"}[kind]
    return sorted((DATA / folder).glob("*.yaml")) + sorted((REPO / "lib" / "servebook" / "data" / folder).glob("*.yaml"))


@pytest.mark.parametrize("kind, path", [(kind, path) for kind in KINDS for path in _shipped(kind)],
                         ids=lambda value: value.name if isinstance(value, Path) else value)
def test_every_shipped_input_is_valid_under_its_schema(kind, path):
    data = read_yaml(path)  # as the loaders read it
    load(kind, data)
    assert schema_errors(kind, data) == [], path


@pytest.mark.parametrize("engine", sorted(TEMPLATES))
@pytest.mark.parametrize("model, gpus", [("Qwen/Qwen3-0.6B", None), ("/models/m", [0, 1]), ("tiny:target", None)])
def test_every_filled_template_is_valid_under_the_study_schema(engine, model, gpus):
    if gpus and not TEMPLATES[engine].gpus:
        gpus = None
    import yaml

    data = yaml.safe_load(render(engine, model, gpus=gpus))
    load("study", data)
    assert schema_errors("study", data) == []


CANDIDATE = {"name": "c", "engine": "vllm", "model": {"id": "org/m"}, "knobs": {"chunk_size": 2048},
             "launch": {"ready_timeout_s": 60}}
PLAN = {"decode": {"concurrency": [1, 4], "output_tokens": 32}, "prefill": {"prompt_tokens": [512]},
        "load": {"rates_rps": [1.0], "prompt_tokens": 128}}
STUDY = {"name": "s", "base": {"engine": "llamacpp", "model": {"path": "tiny:target"}},
         "axes": {"grid": {"knobs.chunk_size": [64, 128]}},
         "variants": [{"name": "v", "set": {"knobs.max_running_requests": 2, "launch.env.FOO": "1"}}],
         "plan": {"decode": {"concurrency": [1]}, "prefill": None},
         "verdict": {"rules": [{"metric": "aggregate_tok_s", "max_regression_pct": 5}]}}
EXAMPLES = {"candidate": CANDIDATE, "plan": PLAN, "study": STUDY}


def _changed(data: dict, path: tuple, value) -> dict:
    """A copy of `data` with `value` at `path`, mappings made on the way as needed."""
    data = copy.deepcopy(data)
    target = data
    for key in path[:-1]:
        target = target.setdefault(key, {}) if isinstance(target, dict) else target[key]
    target[path[-1]] = value
    return data


#: (kind, where, key, value): each adds a field the loaders refuse
MISTAKES = [
    ("candidate", ("knobs",), "chunk_sise", 2048),
    ("candidate", (), "engin", "vllm"),
    ("candidate", ("launch",), "ready_timout_s", 60),
    ("candidate", ("model",), "served", "m"),
    ("candidate", ("knobs",), "gpu_layers", 10),  # llama.cpp's knob on a vLLM candidate
    ("candidate", ("knobs",), "kv_dtype", "fp9"),  # not one of vLLM's KV dtypes
    ("candidate", (), "engine", "vllmm"),
    ("candidate", ("knobs", "drafter"), "num_steps", 2),  # SGLang's drafter setting on vLLM
    ("plan", ("decode",), "concurency", [1]),
    ("plan", (), "warmup", 2),
    ("plan", ("load",), "rate_rps", [1.0]),
    ("study", ("base", "knobs"), "chunk_sise", 64),
    ("study", ("variants", 0, "set"), "knobs.chunk_sise", 64),
    ("study", ("axes", "grid"), "knobs.chunk_sise", [64]),
    ("study", ("variants", 0, "set"), "launch.gpus.0", 1),  # below a list, not a mapping
    ("study", ("variants", 0, "set"), "knobs.prefix_caching", False),  # vLLM's and SGLang's, not llama.cpp's
    ("study", ("verdict",), "baseline_form", "x"),
    ("study", ("variants", 0), "sett", {}),
]


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_the_examples_the_mistakes_are_made_in_are_valid(kind):
    load(kind, EXAMPLES[kind])
    assert schema_errors(kind, EXAMPLES[kind]) == []


@pytest.mark.parametrize("kind, where, key, value", MISTAKES, ids=lambda v: str(v))
def test_a_misspelled_or_foreign_field_is_refused_by_the_schema_as_by_the_loaders(kind, where, key, value):
    data = _changed(EXAMPLES[kind], (*where, key), value)
    with pytest.raises(InputError):
        load(kind, data)
    assert schema_errors(kind, data), f"the {kind} schema accepts {'.'.join(map(str, (*where, key)))}: {value!r}"


@pytest.mark.parametrize("engine", sorted(KNOB_MODELS))
def test_every_override_path_the_study_schema_offers_is_one_the_loader_walks(engine):
    paths, mappings = dotted_fields(Candidate, {"knobs": KNOB_MODELS[engine]})
    assert "knobs.chunk_size" in paths and "launch.env" in mappings
    offered = shipped_schema("study")["$defs"][f"OverridePath_{engine}"]
    names = jsonschema.Draft202012Validator({**offered, "$defs": {}})
    for path in [*paths, *(f"{m}.ANY_KEY" for m in mappings)]:
        _check_override_paths({"base": {"engine": engine}, "variants": [{"name": "v", "set": {path: 1}}]}, "s")
        assert names.is_valid(path), path
    assert not names.is_valid("knobs.chunk_sise")


def test_the_screening_plan_overrides_name_fields_of_a_plan():
    paths, _ = dotted_fields(Plan)
    assert "decode.concurrency" in paths and "load.duration_s" in paths
    study = json.loads(json.dumps(STUDY))
    study["search"] = {"space": {"knobs.chunk_size": [64, 128]},
                       "objective": {"metric": "aggregate_tok_s", "concurrency": 1},
                       "screen": {"plan": {"decode.rounds": 1}}}
    load("study", study)
    assert schema_errors("study", study) == []
    study["search"]["screen"]["plan"] = {"decode.round": 1}
    with pytest.raises(InputError):
        load("study", study)
    assert schema_errors("study", study)
    study["search"]["screen"]["plan"] = {}
    study["search"]["space"] = {"knobs.chunk_sise": [64, 128]}
    with pytest.raises(InputError):
        load("study", study)
    assert schema_errors("study", study)


@pytest.mark.parametrize("reasoning", [True, "on", "off", "high", {"mode": True}, {"mode": "on", "effort": "low"}])
def test_the_shorthands_the_models_read_are_valid_under_the_schema(reasoning):
    candidate = {**CANDIDATE, "knobs": {"reasoning": reasoning}, "pins": {"engine_version": 0.26}}
    load("candidate", candidate)
    assert schema_errors("candidate", candidate) == []
    assert schema_errors("candidate", {**candidate, "knobs": {"reasoning": "loud"}})
