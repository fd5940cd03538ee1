#!/usr/bin/env bash
# The GPU host's half of a study on a machine with no network: take the bundle's parts as they arrive, install
# the engine and servebook's dependencies from them, write the random-weight models, and sweep a study.
# The other half, on a machine with the package registries, is `python3 tools/gpu-host/gpu_bundle.py build`
# (tools/gpu-host/README.md walks through both). Every step is idempotent, so calls can be repeated and resumed.
#
# bash tools/gpu-host/gpu-host.sh STEP, from the checkout's root (the script finds it from anywhere):
#
#   receive DIR          copy the parts carried in DIR into $PARTS, each checked (one call per part). Exit 0: every
#                        part is here (run setup); 3: parts still to come, those here sound (not a failure: carry the
#                        next); 2: a damaged part (carry it again) or no parts.json. So `receive DIR && setup` in
#                        every call sets up once the last part is in, and its status says which of the three it was
#   receive-model DIR    a real model's GGUF carried in parts (tools/gpu-host/split_model.sh): copied in as they
#                        arrive, joined into servebook's cache with the last one; the same exit statuses
#   setup                verify, join and install the bundle; prepare the engines that the studies of $STUDY launch:
#                        their models, llama.cpp's CUDA build
#   engines              those engines, one a line
#   study [SWEEP ARGS]   sweep $STUDY into $JOURNAL (default: --until-decided --max-repeats 6), each of its studies in
#                        turn where it names several. BUDGET=540: start no run or resident round that the 540 s left
#                        cannot hold, so one call ends between rounds; the next `study` call resumes from the journal
#   start [SWEEP ARGS]   the same sweep detached from this call (setsid), its log in $STUDY_LOG: a study longer than
#                        one call's limit (10 minutes on the lent machines); it runs from a copy of the code, which
#                        later calls cannot rewrite
#   wait [SECONDS]       until the detached sweep ends (its exit status) or SECONDS pass (540; exit 3: still running);
#                        its progress either way. Call it again at once: a lent machine goes back when no call comes
#                        within 30 s of the last
#   probe                the study's baseline, one launch, a short plan ($PLAN): does it serve?
#   failures             each failing launch of data/studies/h200-ENGINE-failures.yaml (the study's engine; FAILURES
#                        another), and an engine killed in the middle of a cell of the study's baseline
#   placement [ARGS]     benchmarks/gpu_placement.py on the baseline's flags (LAUNCHES)
#   reasoning OUT_DIR [record|run]  the 1B checkpoint as a thinking model under vLLM's deepseek_r1 parser: its raw
#                        streams (thinking on and off) recorded into OUT_DIR, then one servebook run of it with
#                        knobs.reasoning and the quick plan (docs/reasoning.md); both by default
#   pack OUT_DIR         the journal as an archive in OUT_DIR (in 15 MiB parts when larger)
#   all [SWEEP ARGS]     setup, then study
#   help                 this text
#
# A bundle built with `--engine llamacpp==0.3.36` carries llama.cpp's sdist: setup builds llama-server with CUDA
# and writes GGUF models where a study launches llama.cpp (STUDY=data/studies/h200-1b-llamacpp.yaml), and Hugging
# Face checkpoints where one launches vLLM or SGLang; a bundle of both engines serves both
# (STUDY="data/studies/h200-vllm-1b-noise-sliced.yaml data/studies/h200-llamacpp-1b-noise-sliced.yaml").
# `pack` also keeps vLLM's compile cache when it is small (under 16 MiB): carried back to the next machine as
# CACHE_ARCHIVE (say .bundle/vllm-cache.tar.xz), setup unpacks it, and the first start skips compiling.
#
# Environment: STUDY (data/studies/h200-vllm-1b.yaml; several, separated by spaces, are swept in turn), JOURNAL
# (/tmp/sb-journal), PARTS (/tmp/sb-parts), SITE_DIR (/tmp/sb-site: where the wheels are installed), MODELS (1b:
# `servebook models random --params`; real:NAME: a real model received with receive-model), BUDGET (seconds the
# sweep may start runs in; unset: no limit), PYTHON (python3), STUDY_LOG (/tmp/sb-study.log).
set -euo pipefail
cd "$(dirname "$0")/../.."
STUDY=${STUDY:-data/studies/h200-vllm-1b.yaml}
JOURNAL=${JOURNAL:-/tmp/sb-journal}
PARTS=${PARTS:-/tmp/sb-parts}
SITE_DIR=${SITE_DIR:-/tmp/sb-site}
MODELS=${MODELS:-1b}
PYTHON=${PYTHON:-python3}
STUDY_LOG=${STUDY_LOG:-/tmp/sb-study.log}

# servebook from this checkout (its notebooks and data travel with it), everything else from the bundle
export PYTHONPATH="$PWD/lib:$SITE_DIR${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$SITE_DIR/bin:$PATH"
export JUPYTER_PATH="$SITE_DIR/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
# the compile caches in one place, which `pack` keeps for the next machine
export SERVEBOOK_CACHE=${SERVEBOOK_CACHE:-/tmp/sb-cache}
export VLLM_CACHE_ROOT=${VLLM_CACHE_ROOT:-$SERVEBOOK_CACHE/vllm} TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$SERVEBOOK_CACHE/triton}
SB=("$PYTHON" -m servebook.cli)

# The study's base as a candidate file of its own (NAME, and launch.env SERVEBOOK_DRILL=NAME unless NAME is
# "baseline": a drilled run must never count as one of the study's baseline runs) and the study's plan beside it
study_baseline() {
  "$PYTHON" - "${STUDY%% *}" "$1" "$2" "$3" <<'PY'
import sys, yaml
study_file, candidate_file, plan_file, name = sys.argv[1:]
study = yaml.safe_load(open(study_file))
base = study["base"]
if name != "baseline":
    launch = base.get("launch", {})
    base = {**base, "launch": {**launch, "env": {**launch.get("env", {}), "SERVEBOOK_DRILL": name}}}
yaml.safe_dump({**base, "name": name}, open(candidate_file, "w"))
yaml.safe_dump(study["plan"], open(plan_file, "w"))
PY
}

# The engines that the studies of $STUDY launch, one a line
study_engines() {
  # shellcheck disable=SC2086  # STUDY: study files separated by spaces
  "$PYTHON" -c 'import sys; from servebook.config import load_study
print("\n".join(sorted({e.candidate.engine for f in sys.argv[1:] for e in load_study(f).expand()})))' $STUDY
}

step=${1:-all}
[ $# -gt 0 ] && shift
case "$step" in
  help|-h|--help)
    # the header above, without its comment marks
    sed -n '2,/^set -euo/p' tools/gpu-host/gpu-host.sh | sed -e '$d' -e 's/^# \{0,1\}//'
    ;;
  receive)
    "$PYTHON" tools/gpu-host/gpu_bundle.py collect --from "${1:?receive DIR}" --into "$PARTS"
    ;;
  receive-model)
    # The parts and their SHA256SUMS (tools/gpu-host/split_model.sh) are kept beside the cache until every one is there;
    # servebook checks the joined file against the model's pinned upstream digest before it serves it.
    from=${1:?receive-model DIR}
    held="$SERVEBOOK_CACHE/models/real/.parts"
    mkdir -p "$held"
    cp "$from"/SHA256SUMS "$held"/
    for part in "$from"/*.part-* "$from"/*-tokenizer.tar.xz; do
      [ -f "$part" ] && [ ! -f "$held/${part##*/}" ] && cp "$part" "$held"/
    done
    (cd "$held" && sha256sum --quiet --check --ignore-missing SHA256SUMS) || { echo "a damaged part: carry it again" >&2; exit 2; }
    missing=$(cd "$held" && while read -r _ name; do [ -f "$name" ] || echo "$name"; done < SHA256SUMS)
    if [ -n "$missing" ]; then echo "waiting for:" $missing; exit 3; fi
    name=$(awk 'NR == 1 {print $2}' "$held/SHA256SUMS"); name=${name%.part-*}
    cat "$held/$name".part-* > "$held/$name" && mv "$held/$name" "$SERVEBOOK_CACHE/models/real/$name"
    rm -f "$held"/*.part-*
    echo "joined $SERVEBOOK_CACHE/models/real/$name"
    # used only where this host's transformers converts the GGUF's tokenizer wrongly (servebook checks which)
    for t in "$held"/*-tokenizer.tar.xz; do
      [ -f "$t" ] && tar -C "$SERVEBOOK_CACHE/models/real" -xJf "$t" && echo "carried tokenizer ${t##*/}"
    done
    ;;
  setup)
    "$PYTHON" tools/gpu-host/gpu_bundle.py install --parts "$PARTS" --target "$SITE_DIR"
    # the compile cache the last lent machine left (data/gpu-caches: small, committed so a fresh clone has it)
    CACHE_ARCHIVE=${CACHE_ARCHIVE:-$(ls data/gpu-caches/vllm-*.tar.xz 2>/dev/null | tail -1 || true)}
    if [ -n "${CACHE_ARCHIVE:-}" ] && [ -f "$CACHE_ARCHIVE" ]; then
      mkdir -p "$SERVEBOOK_CACHE" && tar -C "$SERVEBOOK_CACHE" -xJf "$CACHE_ARCHIVE" && echo "compile cache from $CACHE_ARCHIVE"
    fi
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,memory.used,memory.total,power.limit --format=csv
    sdist=$(ls "$SITE_DIR"/sources/llama_cpp_python-*.tar.gz 2>/dev/null | head -1 || true)
    # the GPU engines imported once (seconds): their versions said
    "$PYTHON" - <<'PY' 2>/dev/null || true
import importlib, sys
for name in ("vllm", "sglang"):
    try:
        print(name, importlib.import_module(name).__version__, "on python", sys.version.split()[0])
    except Exception:
        pass
PY
    # Only what the studies of $STUDY launch is prepared: llama.cpp's CUDA build takes 4.5 to 5 minutes of a lent
    # machine's 30, wasted on a vLLM study carried in a bundle of both engines. The Hugging Face checkpoints come
    # first, the build after them.
    engines=$(study_engines)
    echo "the studies launch:" $engines
    if grep -qvx llamacpp <<< "$engines"; then
      if [[ "$MODELS" == real:* ]]; then
        "${SB[@]}" models real "${MODELS#real:}" --format hf
      else
        "${SB[@]}" models random --params "$MODELS" --format hf
      fi
    fi
    if grep -qx llamacpp <<< "$engines"; then
      [ -n "$sdist" ] || { echo "a study launches llama.cpp, and the bundle carries no llama-cpp-python sdist" >&2; exit 2; }
      # llama.cpp: servebook builds llama-server for this GPU from the carried sdist, then the GGUF models
      "${SB[@]}" engine install llamacpp --backend cuda --source "$sdist"
      "${SB[@]}" models random --params "$MODELS" --format gguf
    fi
    ;;
  engines)
    study_engines
    ;;
  study)
    if [ $# -eq 0 ]; then set -- --until-decided --max-repeats 6; fi
    # exec: a `timeout` around this step must reach servebook itself, which then stops its engines (a shell in
    # between took the signal alone once, and the sweep and its engines ran on)
    read -ra studies <<< "$STUDY"
    if [ "${#studies[@]}" -eq 1 ]; then
      exec "${SB[@]}" sweep "$STUDY" --journal "$JOURNAL" ${BUDGET:+--time-budget "$BUDGET"} "$@"
    fi
    # several studies in turn on one machine (one engine's launch noise beside another's); the worst status is kept
    status=0
    for study in "${studies[@]}"; do
      "${SB[@]}" sweep "$study" --journal "$JOURNAL" ${BUDGET:+--time-budget "$BUDGET"} "$@" || status=$(( $? > status ? $? : status ))
    done
    exit "$status"
    ;;
  start)
    # Detached into a session of its own: a lent machine kills what a call leaves behind except such a process,
    # so the sweep (and its resident engines) outlive the call that started it, and its status lands in .rc.
    # It runs from a copy of servebook's code, notebooks and studies: a lent machine copies the working tree afresh
    # at the start of every call, and a notebook that imported servebook while the next call (`wait`) rewrote it
    # failed ("cannot import name 'llamacpp' from partially initialized module 'servebook.engines'", 2026-12-06).
    tree=$(mktemp -d "${TMPDIR:-/tmp}/sb-tree.XXXXXX")
    tar -cf - --exclude=data/sample-journals.tar.xz --exclude=__pycache__ pyproject.toml lib notebooks scripts tools \
      data | tar -C "$tree" -xf -
    JOURNAL=$(realpath -m "$JOURNAL") STUDY_LOG=$(realpath -m "$STUDY_LOG")
    read -ra studies <<< "$STUDY"
    STUDY=$(for study in "${studies[@]}"; do if [ -f "$study" ]; then realpath "$study"; else echo "$study"; fi; done | xargs)
    export STUDY JOURNAL PARTS SITE_DIR MODELS PYTHON STUDY_LOG
    rm -f "$STUDY_LOG.rc"
    setsid nohup bash -c 'bash "$0/tools/gpu-host/gpu-host.sh" study "$@"; echo $? > "$STUDY_LOG.rc"' "$tree" "$@" \
      > "$STUDY_LOG" 2>&1 < /dev/null &
    echo $! > "$STUDY_LOG.pid"
    echo "sweep of $STUDY started (pid $!) from $tree, log $STUDY_LOG: 'tools/gpu-host/gpu-host.sh wait' follows it"
    ;;
  wait)
    secs=${1:-540}
    pid=$(cat "$STUDY_LOG.pid" 2>/dev/null || true)
    [ -n "$pid" ] || { echo "no detached sweep was started here (tools/gpu-host/gpu-host.sh start)" >&2; exit 2; }
    # by the second: `wait 1` means one second, and a sweep that ends returns at once
    for _ in $(seq 1 "$secs"); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    # what the sweep said last: which runs started, finished, and the verdicts between rounds
    grep -E '^(candidate|\[|verdicts|  [a-z0-9-]+: (accepted|rejected|inconclusive|failed))|runs made' "$STUDY_LOG" | tail -n 40 || true
    if kill -0 "$pid" 2>/dev/null; then echo "still running after ${secs} s"; exit 3; fi
    rc=$(cat "$STUDY_LOG.rc" 2>/dev/null || echo 1)
    echo "sweep ended with status $rc"
    exit "$rc"
    ;;
  probe)
    # The study's baseline launched once and measured with a short plan (PLAN: data/plans/quick.yaml; "study" for the
    # study's own) before a round of resident engines: does this engine start here, serve, and reconcile its counters
    study_baseline /tmp/sb-probe-candidate.yaml /tmp/sb-probe-plan.yaml baseline
    plan=${PLAN:-data/plans/quick.yaml}
    [ "$plan" = study ] && plan=/tmp/sb-probe-plan.yaml
    "${SB[@]}" run /tmp/sb-probe-candidate.yaml --plan "$plan" --journal "$JOURNAL"
    ;;
  failures)
    engine=$("$PYTHON" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["base"]["engine"])' "${STUDY%% *}")
    "${SB[@]}" sweep "${FAILURES:-data/studies/h200-$engine-failures.yaml}" --journal "$JOURNAL" || true
    # An engine that dies mid-cell: the study's baseline with the study's plan, its engine killed (SIGKILL, every
    # process of it) once the first cell's requests are on disk, i.e. inside a later cell.
    study_baseline /tmp/sb-kill-candidate.yaml /tmp/sb-kill-plan.yaml killed-mid-cell
    before=$(ls "$JOURNAL/runs" 2>/dev/null | wc -l)
    "${SB[@]}" run /tmp/sb-kill-candidate.yaml --plan /tmp/sb-kill-plan.yaml --journal "$JOURNAL" &
    runner=$!
    for _ in $(seq 1 600); do
      newest=$(ls -t "$JOURNAL/runs" 2>/dev/null | head -1)
      if [ "$(ls "$JOURNAL/runs" | wc -l)" -gt "$before" ] && [ -f "$JOURNAL/runs/$newest/requests.parquet" ]; then
        # [x]yz: a pattern that never matches the command line of the call that runs this script
        sleep 1.5
        if [ "$engine" = sglang ]; then pkill -9 -f "[s]glang serve" || true; pkill -9 -f "[s]glang::" || true
        else pkill -9 -f "[v]llm serve" || true; pkill -9 -f "[E]ngineCore" || true; fi
        echo "killed the engine of $newest"; break
      fi
      sleep 1
    done
    wait "$runner" || true
    ;;
  placement)
    # where launch noise comes from (benchmarks/gpu_placement.py): the study's baseline flags, one launch per
    # LAUNCHES, the engine's processes moved from CPU to CPU inside each
    model=$("$PYTHON" -c 'from servebook.models.model_specs import RANDOM_MODELS; from servebook.models.hf_checkpoints import hf_checkpoint_path; print(hf_checkpoint_path(RANDOM_MODELS["1b"]))')
    "$PYTHON" benchmarks/gpu_placement.py --port 8123 --launches "${LAUNCHES:-1}" --out "${OUT:-/tmp}/placement.json" "$@" -- \
      env VLLM_SERVER_DEV_MODE=1 vllm serve "$model" --port 8123 --host 127.0.0.1 --max-num-seqs 32 \
      --max-num-batched-tokens 8192 --max-model-len 40960 --enable-prompt-tokens-details
    ;;
  reasoning)
    out=${1:?reasoning OUT_DIR}
    phase=${2:-both}
    mkdir -p "$out"
    model=$("$PYTHON" -c 'from servebook.models.model_specs import RANDOM_MODELS; from servebook.models.hf_checkpoints import ensure_hf_checkpoint; from servebook.models.hf_thinking import write_thinking_checkpoint; print(write_thinking_checkpoint(ensure_hf_checkpoint(RANDOM_MODELS["1b"])))')
    if [ "$phase" != run ]; then
      VLLM_SERVER_DEV_MODE=1 vllm serve "$model" --port 8124 --host 127.0.0.1 --max-model-len 4096 --max-num-seqs 8 \
        --reasoning-parser deepseek_r1 --enable-prompt-tokens-details > "$out/vllm-serve.log" 2>&1 &
      server=$!
      # the raw server-sent events of a chat request with thinking on and one with it off, as the engine sends them
      "$PYTHON" - "$model" "$out" <<'PY' || true
import json, sys, time, httpx
model, out = sys.argv[1], sys.argv[2]
for _ in range(600):
    try:
        if httpx.get("http://127.0.0.1:8124/health", timeout=2).status_code == 200:
            break
    except httpx.HTTPError:
        pass
    time.sleep(1)
for thinking in (True, False):
    body = {"model": model, "messages": [{"role": "user", "content": "Why is the sky blue?"}], "max_tokens": 12,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "chat_template_kwargs": {"enable_thinking": thinking}}
    with httpx.stream("POST", "http://127.0.0.1:8124/v1/chat/completions", json=body, timeout=60) as response:
        text = "".join(response.iter_text())
    open(f"{out}/stream-thinking-{str(thinking).lower()}.sse", "w").write(json.dumps(body) + "\n\n" + text)
info = httpx.get("http://127.0.0.1:8124/server_info?config_format=json", timeout=10).json()
json.dump(info.get("vllm_config", {}).get("structured_outputs_config"), open(f"{out}/structured_outputs_config.json", "w"))
PY
      kill "$server"; wait "$server" || true
      # the engine's own processes leave the GPU a moment after the server
      for _ in $(seq 1 60); do [ -z "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader)" ] && break; sleep 1; done
    fi
    if [ "$phase" != record ]; then
      printf 'name: vllm-1b-thinking\nengine: vllm\nmodel: {path: "%s"}\npins: {engine_version: "0.26.0"}\nknobs: {max_running_requests: 8, context_length: 4096, reasoning: {parser: deepseek_r1, mode: "on"}}\nlaunch: {ready_timeout_s: 600}\n' "$model" > /tmp/sb-thinking.yaml
      "${SB[@]}" run /tmp/sb-thinking.yaml --plan data/plans/quick.yaml --journal "$JOURNAL" || true
    fi
    ;;
  pack)
    out=${1:?pack OUT_DIR}
    mkdir -p "$out"
    tar -C "$(dirname "$JOURNAL")" -cJf "$out/journal.tar.xz" "$(basename "$JOURNAL")"
    # a lent machine gives back files of at most 16 MiB: a bigger journal comes back in parts (cat joins them)
    if [ "$(stat -c %s "$out/journal.tar.xz")" -gt $((15 * 1024 * 1024)) ]; then
      split -b 15M -d "$out/journal.tar.xz" "$out/journal.tar.xz." && rm "$out/journal.tar.xz"
    fi
    if [ -d "$VLLM_CACHE_ROOT" ]; then
      # triton's kernels too: with vLLM's own cache alone, a fresh H200's first start still spent ~100 s silent
      # after graph capture (107 s to ready against 5 s for the next start on that machine), untried whether this
      # is what fills it
      caches=("$(realpath --relative-to="$SERVEBOOK_CACHE" "$VLLM_CACHE_ROOT")")
      [ -d "$TRITON_CACHE_DIR" ] && caches+=("$(realpath --relative-to="$SERVEBOOK_CACHE" "$TRITON_CACHE_DIR")")
      tar -C "$SERVEBOOK_CACHE" -cJf "$out/vllm-cache.tar.xz" "${caches[@]}"
      [ "$(stat -c %s "$out/vllm-cache.tar.xz")" -lt $((16 * 1024 * 1024)) ] || rm -f "$out/vllm-cache.tar.xz"
    fi
    ls -la "$out"
    ;;
  all)
    "$0" setup
    "$0" study "$@"
    ;;
  *)
    echo "unknown step $step: receive, receive-model, setup, engines, study, start, wait, probe, failures, placement," \
      "reasoning, pack, all or help" >&2
    exit 2
    ;;
esac
