#!/usr/bin/env bash
# A GPU qualification with servebook on any host with an NVIDIA GPU, nvcc and CMake:
# build llama-server with CUDA for the GPU's compute capability, write the 1B random-weight model
# and its draft, sweep the study (papermill, one run per candidate and repeat), judge, build the site.
# Nothing is downloaded but the llama-cpp-python sdist from PyPI; set SERVEBOOK_LLAMACPP_SOURCE to a
# llama.cpp tree or .tar.gz to build with no network at all.
#
#   scripts/gpu-study.sh                       # data/studies/h200-1b-llamacpp.yaml into journal-gpu/,
#                                              # 3 launches per candidate, more where undecided, 6 at most
#   STUDY=my.yaml JOURNAL=j scripts/gpu-study.sh --until-decided --max-repeats 10  # options replace the defaults
set -euo pipefail
cd "$(dirname "$0")/.."
STUDY=${STUDY:-data/studies/h200-1b-llamacpp.yaml}
JOURNAL=${JOURNAL:-journal-gpu}
SITE=${SITE:-site-gpu}
if [ -x .venv/bin/servebook ]; then SB=(.venv/bin/servebook); else SB=(python3 -m servebook.cli); fi
nvidia-smi --query-gpu=name,compute_cap,memory.total,power.limit --format=csv
"${SB[@]}" engine install llamacpp --backend cuda
"${SB[@]}" engine info
"${SB[@]}" models random --params 1b
if [ $# -eq 0 ]; then set -- --until-decided --max-repeats 6; fi
"${SB[@]}" sweep "$STUDY" --journal "$JOURNAL" "$@"
"${SB[@]}" site --journal "$JOURNAL" --out "$SITE"
