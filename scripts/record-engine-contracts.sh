#!/usr/bin/env bash
# Record what the pinned SGLang and vLLM releases really accept and export, into lib/servebook/data/engine-contracts/
# (package data; data/engine-contracts links there).
#
#   scripts/record-engine-contracts.sh                      # the releases the example studies pin
#   scripts/record-engine-contracts.sh sglang==0.5.24       # a new release (then re-run make test)
#
# For each release it makes a throwaway virtual environment (about 6-9 GB: the engine with its own torch,
# from PyPI), imports the engine's real argument parser and metric definitions (no GPU, no model, no server),
# and writes ENGINE-VERSION.json: every flag with aliases, type and choices; every Prometheus sample with its
# labels and whether it exists at start; the server-info fields; and how the real parser took every dry-run
# command line of every study in data/studies/. Not part of `make test`: it downloads gigabytes.
# The environments go under $CONTRACT_ENVS (default: a temporary folder, removed at the end).
set -euo pipefail

cd "$(dirname "$0")/.."
releases=("$@")
[ ${#releases[@]} -gt 0 ] || releases=(sglang==0.5.23 vllm==0.33.0)
python=${PYTHON:-python3}
envs=${CONTRACT_ENVS:-$(mktemp -d /tmp/servebook-contracts.XXXXXX)}
[ -n "${CONTRACT_ENVS:-}" ] || trap 'rm -rf "$envs"' EXIT
out=lib/servebook/data/engine-contracts
mkdir -p "$envs"
mkdir -p "$out"

lines="$envs/lines.json"
.venv/bin/python scripts/dry_run_lines.py data/studies/*.yaml > "$lines"

for release in "${releases[@]}"; do
    engine=${release%%==*}
    version=${release#*==}
    env="$envs/$engine-$version"
    started=$(date +%s)
    echo "== $engine $version: installing into $env"
    [ -x "$env/bin/python" ] || "$python" -m venv "$env"
    "$env/bin/pip" install -q --disable-pip-version-check "$engine==$version"
    "$env/bin/python" -c "import json, sys; json.dump(json.load(open(sys.argv[1])).get(sys.argv[2], {}), \
        open(sys.argv[3], 'w'))" "$lines" "$engine" "$env/lines.json"
    echo "== $engine $version: recording"
    "$env/bin/python" scripts/engine_contract.py "$engine" --lines "$env/lines.json" \
        --out "$out/$engine-$version.json" 2> >(grep -v '^W[0-9]' >&2)
    echo "== $engine $version: $out/$engine-$version.json in $(( $(date +%s) - started )) s"
done
.venv/bin/python - "$out" <<'EOF'
import json, pathlib, sys
bad = 0
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    contract = json.loads(path.read_text())
    for study, lines in contract.get("dry_runs", {}).items():
        for name, result in lines.items():
            if result["parsed"] != "ok" and study.endswith("-failures"):
                # a failures study provokes a refused flag on purpose (h200-ENGINE-failures.yaml's baseline)
                print(f"{path.name}: {study}/{name}: refused, as the study provokes: {result['parsed']}")
            elif result["parsed"] != "ok":
                bad += 1
                print(f"{path.name}: {study}/{name}: the real parser says: {result['parsed']}")
    for note in contract.get("notes", []):
        print(f"{path.name}: not recorded: {note}")
print("every dry-run line parses" if not bad else f"{bad} dry-run line(s) rejected")
sys.exit(1 if bad else 0)
EOF
