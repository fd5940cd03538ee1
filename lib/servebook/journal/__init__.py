"""The journal: typed manifests and the store of runs (one directory per run, sealed by its manifest)."""

from .manifest import (
                       SCHEMA_VERSION,
                       EngineInfo,
                       Environment,
                       Failure,
                       GateScore,
                       Manifest,
                       PreflightFinding,
                       RunIdentity,
                       Summary,
)
from .store import Journal, RunRecord, RunSealed, RunWriter, utc_now

__all__ = ["SCHEMA_VERSION", "EngineInfo", "Environment", "Failure", "GateScore", "Journal", "Manifest",
           "PreflightFinding", "RunIdentity", "RunRecord", "RunSealed", "RunWriter", "Summary", "utc_now"]
