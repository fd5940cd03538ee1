"""A study's verdicts as files: one typed report (report.py) and one module per format, each registering its writer
(registry.py), which `servebook judge`/`sweep --format` and the site's study downloads read alike.

A new format is one module here that calls `register_output` and is imported below; its `order` places it in the CLI's
help and on the study page."""

from . import as_csv, as_json, as_junit, as_markdown, as_plain  # noqa: F401  (each registers its format)
from .registry import VerdictOutput, downloads, output_named, output_names, register_output, unregister_output
from .report import NO_GATE, CandidateVerdict, LeftOutRun, VerdictReport, candidate_of, report_of_judged

__all__ = ["NO_GATE", "CandidateVerdict", "LeftOutRun", "VerdictOutput", "VerdictReport", "candidate_of", "downloads",
           "output_named", "output_names", "register_output", "report_of_judged", "unregister_output"]
