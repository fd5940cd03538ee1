"""Engines own their knobs: one model per engine, chosen by `engine`, refusing what it does not take in its own
words; one flag map per engine that builds the command line, guards extra_args and reads settings back; and the
identity of every candidate recorded before the split unchanged."""

import json
from pathlib import Path

import pytest
from pydantic import Field, ValidationError

import servebook.engines as engines
from servebook.config import candidate as candidate_module
from servebook.config import knobs as knobs_module
from servebook.config.candidate import Candidate, Knobs
from servebook.config.loading import load_candidate, load_study
from servebook.engines import get_engine
from servebook.engines.flags import Flag, on_command_line
from servebook.engines.llamacpp import FLAGS, LlamaCppAdapter, LlamaCppKnobs
from servebook.engines.sglang import SGLangKnobs
from servebook.engines.vllm import VLLMKnobs
from servebook.journal import samples
from servebook.launch.verify import NOT_VERIFIED, launched_claims
from servebook.present.claims import claim_text

ROOT = Path(__file__).resolve().parents[3]
#: every candidate id as main computed it at 2f63741, before the knobs were split per engine
IDS_BEFORE = json.loads((ROOT / "tests/fixtures/candidate-ids-2f63741.json").read_text())


def candidate(engine="llamacpp", **fields):
    model = {"path": "tiny:target"} if engine == "llamacpp" else {"id": "org/model", "revision": "abc123"}
    return Candidate.model_validate({"engine": engine, "model": model, **fields})


def test_each_engine_validates_its_candidates_knobs_with_its_own_model():
    assert type(candidate("llamacpp").knobs) is LlamaCppKnobs
    assert type(candidate("vllm", knobs={"prefix_caching": False}).knobs) is VLLMKnobs
    assert type(candidate("sglang", knobs={"drafter": {"kind": "eagle", "model": "e", "num_steps": 3, "topk": 4,
                                                       "max_draft_tokens": 8}}).knobs) is SGLangKnobs
    # an override that changes the engine re-validates the knobs as the new engine's
    moved = candidate("llamacpp", knobs={"chunk_size": 256}).with_overrides({"engine": "vllm", "model.path": None,
                                                                            "model.id": "org/m"})
    assert type(moved.knobs) is VLLMKnobs and moved.knobs.chunk_size == 256


@pytest.mark.parametrize(("engine", "knobs", "words"), [
    ("vllm", {"gpu_layers": 4}, "knobs.gpu_layers is a llama.cpp setting; vLLM places every layer itself"),
    ("sglang", {"prompt_cache_mib": 0}, "llama.cpp's host-memory prompt cache (--cache-ram); SGLang has no such"),
    ("llamacpp", {"prefix_caching": False}, "llama.cpp keeps each slot's last prompt and has no server flag"),
    ("llamacpp", {"drafter": {"kind": "ngram", "topk": 2}}, "SGLang settings; llama.cpp takes max_draft_tokens"),
    ("vllm", {"drafter": {"kind": "ngram", "num_steps": 2}}, "SGLang settings; vLLM takes max_draft_tokens"),
    ("sglang", {"drafter": {"kind": "draft_model", "model": "d", "synthetic_length": 3}},
     "synthetic acceptance is a llama.cpp benchmarking feature"),
    ("openai", {"gpu_layers": 1}, "knobs.gpu_layers is a llama.cpp setting; the generic openai engine has no such"),
    ("llamacpp", {"chunk_sise": 64}, "knobs.chunk_sise: unknown field (did you mean 'chunk_size'?"),
])
def test_a_field_the_engine_does_not_take_is_refused_by_its_model_in_its_words(engine, knobs, words):
    launch = {"mode": "attach", "url": "http://127.0.0.1:9"} if engine == "openai" else {}
    with pytest.raises(ValidationError) as refused:
        candidate(engine, knobs=knobs, launch=launch)
    assert words in str(refused.value)


def test_another_engines_unset_knob_is_how_earlier_servebooks_recorded_it_and_is_accepted():
    # before the split every engine's candidate was dumped with every engine's knobs, null where unset
    recorded = candidate("vllm").model_dump(mode="json")
    recorded["knobs"].update(gpu_layers=None, prompt_cache_mib=None)
    recorded["knobs"]["drafter"].update(num_steps=None, topk=None, synthetic_length=None, synthetic_rates=None)
    assert Candidate.model_validate(recorded).id == candidate("vllm").id
    with pytest.raises(ValidationError, match="unknown field"):
        candidate("vllm", knobs={"no_such_knob": None})  # a misspelling stays an error, even null


@pytest.mark.parametrize("source", sorted(IDS_BEFORE))
def test_every_shipped_candidate_and_study_entry_keeps_its_id(source):
    path, _, entry = source.partition(":")
    if not entry:
        assert load_candidate(ROOT / path).id == IDS_BEFORE[source]
    else:
        ids = {e.name: e.candidate.id for e in load_study(ROOT / path).expand()}
        assert ids[entry] == IDS_BEFORE[source]


def test_every_recorded_run_keeps_its_candidates_id():
    manifests = sorted(samples.samples_root().glob("sample-journal*/runs/*/manifest.json")) + \
        sorted(ROOT.glob("tests/fixtures/*/runs/*/manifest.json"))
    assert len(manifests) > 50
    for path in manifests:
        manifest = json.loads(path.read_text())
        assert Candidate.model_validate(manifest["candidate"]).id == manifest["candidate_id"], path


def test_one_flag_map_builds_the_command_line_guards_extra_args_and_reads_back():
    adapter = get_engine("llamacpp")
    c = candidate(knobs={"chunk_size": 256, "kv_dtype": "q8_0"})
    argv = adapter.argv(c, port=8080, model_path="m.gguf", draft_path=None)
    assert argv[argv.index("-b"):argv.index("-b") + 4] == ["-b", "256", "-ub", "256"]
    assert set(FLAGS["knobs.chunk_size"].spellings) <= set(adapter.owned["chunk_size"])
    with pytest.raises(ValidationError, match="--batch-size conflicts with knobs.chunk_size"):
        candidate(knobs={"chunk_size": 256}, extra_args=["--batch-size", "64"])
    shown = launched_claims({"knobs.chunk_size": NOT_VERIFIED, "knobs.kv_dtype": NOT_VERIFIED}, adapter, argv)
    assert claim_text(shown["knobs.chunk_size"]) == "set on the command line: -b 256 -ub 256 (the server does not report it)"
    assert claim_text(shown["knobs.kv_dtype"]).startswith("set on the command line: -ctk q8_0 -ctv q8_0")


class ThreadedKnobs(LlamaCppKnobs):
    """What adding a knob to llama.cpp costs: this field and the flag entry below, both in its own module."""

    threads: int | None = Field(None, ge=1, description="llama.cpp: CPU threads for generation (-t)")


class ThreadedAdapter(LlamaCppAdapter):
    kind = "llamacpp-threads"
    knobs_model = ThreadedKnobs
    flags = {**FLAGS, "knobs.threads": Flag(("-t",), also=("--threads",))}


@pytest.fixture
def threaded(monkeypatch):
    adapter = ThreadedAdapter()
    monkeypatch.setitem(engines.registry._REGISTRY, adapter.kind, adapter)
    monkeypatch.setitem(knobs_module.KNOB_MODELS, adapter.kind, ThreadedKnobs)
    monkeypatch.setitem(candidate_module.ENGINE_CHECKS, adapter.kind, adapter.check)
    return adapter


def test_a_knob_added_in_the_engines_module_alone_works_everywhere(threaded):
    c = candidate("llamacpp-threads", knobs={"threads": 8, "chunk_size": 128})
    argv = threaded.argv(c, port=1, model_path="m.gguf", draft_path=None)
    assert argv[argv.index("-t"):argv.index("-t") + 2] == ["-t", "8"]  # the command line
    assert on_command_line(argv, threaded.flags["knobs.threads"]) == "-t 8"  # read back
    assert '"threads":8' in c.canonical_json() and c.id != candidate("llamacpp-threads", knobs={"chunk_size": 128}).id
    with pytest.raises(ValidationError, match="--threads conflicts with knobs.threads"):  # extra_args guarded
        candidate("llamacpp-threads", knobs={"threads": 8}, extra_args=["--threads", "2"])
    with pytest.raises(ValidationError, match="knobs.threads is a llama.cpp setting; vLLM has no such knob"):
        candidate("vllm", knobs={"threads": 8})  # and every other engine refuses it, naming whose it is
    assert "threads" not in type(candidate("llamacpp").knobs).model_fields  # the shipped engine is untouched


def test_journal_filters_know_every_engines_knobs():
    from servebook.config.errors import InputError
    from servebook.journal.browse import typed

    assert typed("knobs.prefix_caching", "false", []) is False  # vLLM's and SGLang's
    assert typed("knobs.gpu_layers", "3", []) == 3  # llama.cpp's
    assert typed("knobs.drafter.num_steps", "2", []) == 2  # SGLang's drafter
    with pytest.raises(InputError, match="did you mean 'knobs.prefix_caching'"):
        typed("knobs.prefix_cachin", "false", [])


@pytest.mark.parametrize(("engine", "flagless"), [("llamacpp", {"tensor_parallel_size"}), ("vllm", set()),
                                                  ("sglang", set()), ("openai", set(Knobs.model_fields))])
def test_every_knob_an_engine_takes_has_its_flags_in_the_one_map(engine, flagless):
    adapter = get_engine(engine)
    mapped = {path.removeprefix("knobs.") for path in adapter.flags if path.startswith("knobs.")}
    # llama.cpp's tensor_parallel_size only takes 1, and the generic engine's knobs only their defaults
    assert set(adapter.knobs_model.model_fields) - mapped == flagless
