#!/usr/bin/env bash
# A real model's GGUF in parts small enough to carry one per call to a GPU host with no network, with the
# SHA256SUMS that `tools/gpu-host/gpu-host.sh receive-model` checks them against there.
#
#   tools/gpu-host/split_model.sh real:gemma3-270m .realparts [MIB]   # into .realparts (git-ignored)
#
# Each device call then carries `.realparts/SHA256SUMS` and one part (the last with NAME-tokenizer.tar.xz, 3.5 MiB).
# A part, what travels with it and the working tree must fit in 64 MiB: MIB defaults to the bundle's part size
# (`gpu_bundle.py size`) less 4 MiB for the tokenizer.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:?a real model, as real:NAME}
out=${2:-.realparts}
mib=${3:-$(( $(python3 tools/gpu-host/gpu_bundle.py size --quiet | cut -d. -f1) - 4 ))}
file=$(${PYTHON:-.venv/bin/python} -c "import sys; from servebook.models.real_models import ensure_real_model
print(ensure_real_model(sys.argv[1]))" "$model")
rm -rf "$out" && mkdir -p "$out"
split -b "${mib}M" -d -a 2 "$file" "$out/$(basename "$file").part-"
# the tokenizer converted here and checked against the GGUF's own ids (models/real_checkpoints.py): a host whose
# transformers converts it wrongly (5.17, the lent GPU image's) uses this one; it travels with the last part
tokenizer=$(${PYTHON:-.venv/bin/python} -c "import sys; from pathlib import Path
from servebook.models.real_checkpoints import write_real_tokenizer
print(write_real_tokenizer(sys.argv[1], Path(sys.argv[2])))" "$model" "$out")
tar -C "$out" -cJf "$tokenizer.tar.xz" "$(basename "$tokenizer")" && rm -rf "$tokenizer"
(cd "$out" && sha256sum -- *.part-* *-tokenizer.tar.xz > SHA256SUMS)
ls -l "$out"
