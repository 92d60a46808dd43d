#!/usr/bin/env bash
# A short smoke test of `kata check --device cuda` on a machine with a GPU: every single-process reference (each
# must pass), a few shipped katas (each must show its planted bug), a profiled check (--profile: each phase boundary
# waits for the GPU), the data-parallel reference as two ranks over nccl when the machine has two GPUs, and the same
# checks' --json reports. Run from the repository root; the
# project's modules are taken from here (PYTHONPATH), so it needs no install beyond torch, click, rich, libcst.
# Usage: bash bench/cuda_smoke.sh [OUTPUT_FOLDER]
set -u
out=${1:-cuda-smoke}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" COLUMNS=80 NO_COLOR=1
kata() { python3 -m katas "$@"; }
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')" | tee "$out/versions.txt"
fails=0
expect() {  # expect CODE NAME ARGS...: run kata check ARGS, keep its text and JSON, compare the exit code
    local want=$1 name=$2; shift 2
    local started=$SECONDS
    kata check "$@" >"$out/$name.txt" 2>&1; local got=$?
    kata check "$@" --json >"$out/$name.json" 2>/dev/null
    local verdict=ok; [ "$got" = "$want" ] || { verdict=UNEXPECTED; fails=$((fails + 1)); cat "$out/$name.txt"; }
    printf '%-12s exit %s (expected %s) %3ss %s\n' "$name" "$got" "$want" $((SECONDS - started)) "$verdict" | tee -a "$out/summary.txt"
}
for ref in reference/*.py; do
    name=$(basename "$ref" .py)
    [ "$name" = ddp ] && continue
    expect 0 "$name" "$ref" --device cuda
done
for kata in 01 03 05 09 13; do
    expect 1 "kata-$kata" "broken/$kata.py" --device cuda
done
expect 0 profiled reference/classifier.py --device cuda --profile
gpus=$(python3 -c "import torch; print(torch.cuda.device_count())")
if [ "$gpus" -ge 2 ]; then expect 0 ddp reference/ddp.py --device cuda --nproc 2; fi
echo "unexpected: $fails" | tee -a "$out/summary.txt"
[ "$fails" = 0 ]
