#!/usr/bin/env bash
# A performance gate for a serving configuration, for any CI system: sweep a study, judge it, write the
# verdicts for machines (JUnit, JSON) and reviewers (Markdown, also appended to $GITHUB_STEP_SUMMARY when set),
# publish the journal's site, and exit with the gate's code (0 passed; 10 rejected, 11 failed,
# 12 inconclusive, 13 missing: see `servebook judge --help`). Any other non-zero exit means servebook itself
# could not run (2 bad input, 3 engine build, 4 engine failed), and the job fails at that step.
#
#   STUDY=examples/ci/release-gate.yaml SERVEBOOK_JOURNAL=s3://perf/serving examples/ci/gate.sh
#
# The journal may live on object storage (s3://, gs://, any fsspec URL): every run, verdict and raw table is
# written there, so the next job's history and recorded baselines see it.
set -euo pipefail

: "${STUDY:?set STUDY to the study YAML to gate on}"
JOURNAL="${SERVEBOOK_JOURNAL:-journal}"
OUT="${GATE_OUT:-gate-out}"
FAIL_ON="${FAIL_ON:-rejected,failed}"
MAX_REPEATS="${MAX_REPEATS:-6}"
SERVEBOOK="${SERVEBOOK:-servebook}"
# The engine release under test, when the job knows it: pinned on every candidate (a new identity, so the
# sweep measures it afresh), and checked against the version the engine reports (a mismatch fails the run).
SET=()
if [ -n "${ENGINE_VERSION:-}" ]; then SET=(--set "pins.engine_version=$ENGINE_VERSION"); fi

mkdir -p "$OUT"
# Runs the study's repeats, then more where a verdict is undecided, up to MAX_REPEATS per candidate. The
# sweep itself does not gate: the outputs below are written whatever the verdicts say.
$SERVEBOOK sweep "$STUDY" "${SET[@]}" --journal "$JOURNAL" --until-decided --max-repeats "$MAX_REPEATS"

# judge FORMAT FILE: the verdicts in one format; returns the gate's code, and ends the job when servebook itself
# could not run
judge() {
  local code=0
  $SERVEBOOK judge "$STUDY" "${SET[@]}" --journal "$JOURNAL" --fail-on "$FAIL_ON" --format "$1" --output "$2" \
    || code=$?
  case "$code" in 0|10|11|12|13) return "$code" ;; *) echo "servebook judge could not run (exit $code)" >&2; exit "$code" ;; esac
}
gate=0
# The Markdown goes to $GITHUB_STEP_SUMMARY (when set) once; the other formats only write their files.
GITHUB_STEP_SUMMARY= judge junit "$OUT/verdicts.xml" || gate=$?
GITHUB_STEP_SUMMARY= judge json "$OUT/verdicts.json" || true
judge markdown "$OUT/summary.md" || true
$SERVEBOOK site --journal "$JOURNAL" --out "$OUT/site"

cat "$OUT/summary.md"
exit "$gate"
