"""The qualify notebook's parameters are validated like YAML input (issue 19, item 5): papermill's strings are
read where their meaning is clear, and anything else is one message naming the parameter."""

import pytest

import servebook as sb
from servebook.config.errors import InputError
from servebook.config.loading import validate
from servebook.config.parameters import QualifyParameters
from servebook.journal import samples


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


# Every notebook's list parameters read through one coercion (issue 34, item 10): papermill's `-p run_ids a,b`
# used to reach compare() as the string "a,b", iterated one character at a time.
@pytest.mark.parametrize("value", ["a,b", " a , b ", "[a, b]", ["a", "b"], ("a", "b"), "a,\nb"])
def test_a_list_parameter_reads_as_papermill_and_yaml_pass_it(value):
    from servebook.config.parameters import CompareParameters

    assert validate(CompareParameters, {"run_ids": value}, "notebook parameters").run_ids == ["a", "b"]


def test_one_item_a_number_and_nothing_are_lists_or_none():
    from servebook.config.parameters import CompareParameters, as_list

    def run_ids(value):
        return validate(CompareParameters, {"run_ids": value}, "notebook parameters").run_ids

    assert run_ids("20261201T0056") == ["20261201T0056"]
    assert run_ids(20261201) == ["20261201"]  # `-p run_ids 20261201`: papermill made it a number
    assert run_ids(None) is None and run_ids("") is None
    assert as_list("[0, 1]") == [0, 1] and as_list(3) == [3]


@pytest.mark.parametrize("value", ["a,,b", True, "[a, b"])
def test_a_list_that_cannot_be_meant_is_one_message_naming_it(value):
    from servebook.config.parameters import CompareParameters

    with pytest.raises(InputError, match="run_ids"):
        validate(CompareParameters, {"run_ids": value}, "notebook parameters")


def test_compare_reads_run_ids_given_as_text(tmp_path):
    import shutil

    journal = tmp_path / "journal"
    shutil.copytree(samples.sample_journal("sample-journal"), journal)
    first, second = sb.Journal(str(journal)).run_ids()[:2]
    comparison = sb.compare(run_ids=f"{first},{second[-12:]}", journal=str(journal))
    assert [r.run_id for r in comparison.runs] == [first, second]
