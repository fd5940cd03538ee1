"""The qualify notebook's parameters are validated like YAML input (issue 19, item 5): papermill's strings are
read where their meaning is clear, and anything else is one message naming the parameter."""

import pytest

import servebook as sb
from servebook.config.errors import InputError
from servebook.config.loading import validate
from servebook.config.parameters import QualifyParameters


def given(**parameters) -> QualifyParameters:
    return validate(QualifyParameters, parameters, "notebook parameters")


def test_papermill_strings_read_as_the_cli_reads_them():
    assert given(overrides="knobs.chunk_size=128").overrides == {"knobs.chunk_size": 128}
    assert given(overrides="knobs.chunk_size=128, knobs.drafter.kind=ngram").overrides == {
        "knobs.chunk_size": 128, "knobs.drafter.kind": "ngram"}
    assert given(overrides=None).overrides == {}
    assert given(visible_gpus=0).visible_gpus == [0]
    assert given(visible_gpus="0,1").visible_gpus == [0, 1]
    assert given(visible_gpus=[2, 3]).visible_gpus == [2, 3]


@pytest.mark.parametrize("parameters, named", [({"visible_gpus": "0,,1"}, "visible_gpus"),
                                               ({"visible_gpus": True}, "visible_gpus"),
                                               ({"overrides": 5}, "overrides"),
                                               ({"overrides": "chunk"}, "KEY=VALUE"),
                                               ({"jounral": "j"}, "jounral")])
def test_anything_else_is_one_message_naming_the_parameter(parameters, named):
    with pytest.raises(InputError, match=named):
        given(**parameters)


def test_qualify_refuses_a_bad_parameter_before_anything_starts(tmp_path):
    with pytest.raises(InputError, match="visible_gpus"):
        sb.qualify(candidate_path="data/candidates/tiny-llamacpp.yaml", visible_gpus="zero",
                   journal=str(tmp_path / "j"))
    assert not (tmp_path / "j").exists()
