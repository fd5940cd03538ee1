"""One strict base for every model a user writes: a typo names the field, a loaded model never changes, and a
number is finite wherever it is written."""

import inspect

import pytest
from pydantic import BaseModel, ValidationError

from servebook.config import agents, candidate, load, plan, replicas, rules, scaling, search, slices, study
from servebook.config.strict import StrictModel

WRITTEN_BY_USERS = (agents, candidate, load, plan, replicas, rules, scaling, search, slices, study)


def models_of(module) -> list[type[BaseModel]]:
    return [obj for _, obj in inspect.getmembers(module, inspect.isclass)
            if issubclass(obj, BaseModel) and obj.__module__ == module.__name__]


@pytest.mark.parametrize("module", WRITTEN_BY_USERS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_input_model_is_strict(module):
    models = models_of(module)
    assert models, f"{module.__name__} defines no model: the list above is stale"
    loose = [m.__name__ for m in models if not issubclass(m, StrictModel)]
    assert not loose, f"{module.__name__}: {loose} do not derive from config.strict.StrictModel"


def test_a_typo_a_change_and_a_nan_are_refused():
    class Rate(StrictModel):
        per_second: float

    with pytest.raises(ValidationError, match="per_secnd"):
        Rate.model_validate({"per_secnd": 2.0})
    with pytest.raises(ValidationError, match="finite"):
        Rate.model_validate({"per_second": float("nan")})
    with pytest.raises(ValidationError, match="frozen"):
        Rate(per_second=1.0).per_second = 2.0  # type: ignore[misc]
    for module in WRITTEN_BY_USERS:  # finite everywhere, not only in the load plans that found it
        assert all(m.model_config.get("allow_inf_nan") is False for m in models_of(module))
