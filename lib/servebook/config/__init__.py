"""Inert input models (candidate, plan, study, verdict rules) and their loading from YAML."""

from .candidate import ENGINE_CHECKS, Candidate, Drafter, Knobs, Launch, ModelRef
from .errors import InputError, format_validation_error
from .loading import load_candidate, load_plan, load_study, parse_overrides, read_yaml, validate, with_overrides
from .plan import DecodePlan, Plan, PrefillPlan
from .rules import ComparisonRule, VerdictRules
from .study import Study, StudyEntry

__all__ = [
    "ENGINE_CHECKS", "Candidate", "ComparisonRule", "DecodePlan", "Drafter", "InputError", "Knobs", "Launch",
    "ModelRef", "Plan", "PrefillPlan", "Study", "StudyEntry", "VerdictRules", "format_validation_error",
    "load_candidate", "load_plan", "load_study", "parse_overrides", "read_yaml", "validate", "with_overrides",
]
