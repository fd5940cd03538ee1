from servebook.measure.equivalence import compare_outputs, describe, identical_share


def test_identical_share_and_first_difference():
    assert identical_share([1, 2, 3, 4], [1, 2, 3, 4]) == (1.0, None)
    assert identical_share([1, 2, 3, 4], [1, 2, 9, 4]) == (0.75, 2)
    assert identical_share([1, 2, 3, 4], [1, 2]) == (0.5, 2)  # a shorter output differs where it stops
    assert identical_share([], []) == (1.0, None)


def test_candidate_against_baseline_names_the_first_divergence():
    base = [{"prompt": 0, "mode": "solo", "tokens": [1, 2, 3]}, {"prompt": 1, "mode": "solo", "tokens": [4, 5, 6]}]
    drafted = [{"prompt": 0, "mode": "solo", "tokens": [1, 2, 3]}, {"prompt": 1, "mode": "solo", "tokens": [4, 7, 6]}]
    result = compare_outputs(base, drafted)
    assert result["identical_share"] == 5 / 6
    assert [(d["prompt"], d["first_difference"]) for d in result["diverged"]] == [(1, 1)]
    assert "prompt 1 first differs at token 1" in describe(result, "the baseline")
    assert describe(compare_outputs(base, base), "the baseline").startswith("output identical")
    assert compare_outputs(base, [{"prompt": 5, "mode": "solo", "tokens": [1]}]) is None


def test_a_changed_output_is_shown_with_both_texts():
    # Gemma 3 270M drafting for itself (issue 51): its greedy text parted where the date came
    base = [{"prompt": 0, "mode": "solo", "tokens": [10, 11, 12, 13], "text": "founded in 753 B.C.E. by"}]
    drafted = [{"prompt": 0, "mode": "solo", "tokens": [10, 11, 14, 15], "text": "founded in 74\nBC by"}]
    said = describe(compare_outputs(base, drafted), "the baseline")
    assert "first differs at token 2" in said
    assert 'the baseline wrote "founded in 753 B.C.E. by", this one "founded in 74 BC by"' in said
