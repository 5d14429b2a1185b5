#!/usr/bin/env bash
# Tessera's strategies beside PyTorch's: alternates `mpirun -n 4 tessera-shardbench` and
# torch_strategies.py (4 gloo processes) for --runs runs, then prints both tables side by side
# with the ratio Tessera / torch per strategy (compare.py). See README.md here.
#
#   bench/vs_torch_strategies/run.sh [options] [-- flags for both programs]
#
# Options:
#   --runs N        runs, each Tessera then torch (default 2)
#   --ranks N       processes of each (default 4)
#   --tessera PATH  the tessera-shardbench binary (default $TESSERA_SHARDBENCH, else the first
#                   of build/fast, build/release, build/dev, then any other build/*/tools/)
#   --python PATH   the python with torch 2.15 (default $TORCH_PYTHON, else
#                   /work/venv-torch/bin/python)
#   --out DIR       where the JSON and the logs go (default a new folder under /tmp)
#   --threads       run tessera-shardbench on rank threads (--ranks N), not under mpirun
#   --torch-args S  more flags for torch_strategies.py alone (e.g. "--adamw default")
#   -h, --help
# The flags after them (or after --) go to both programs: --layers --hidden --heads --seq
# --batch --vocab --dtype --steps --warmup --rounds --strategies.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
fail() { echo "run.sh: $*" >&2; exit 2; }

runs=2
ranks=4
tessera="${TESSERA_SHARDBENCH:-}"
python="${TORCH_PYTHON:-/work/venv-torch/bin/python}"
out=""
threads=0
torch_args=""
common=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="${2:?--runs needs a value}"; shift 2 ;;
    --ranks) ranks="${2:?--ranks needs a value}"; shift 2 ;;
    --tessera) tessera="${2:?--tessera needs a path}"; shift 2 ;;
    --python) python="${2:?--python needs a path}"; shift 2 ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --threads) threads=1; shift ;;
    --torch-args) torch_args="${2?--torch-args needs a value}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; common+=("$@"); break ;;
    *) common+=("$1"); shift ;;
  esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || fail "--runs expects an integer >= 1, got '$runs'"
[[ "$ranks" =~ ^[1-9][0-9]*$ ]] || fail "--ranks expects an integer >= 1, got '$ranks'"
for flag in "${common[@]}"; do
  case "$flag" in
    --json|--json=*|--ranks|--ranks=*) fail "$flag is set by run.sh itself" ;;
  esac
done

if [[ -z "$tessera" ]]; then
  for dir in fast release dev; do
    if [[ -x "$root/build/$dir/tools/tessera-shardbench" ]]; then
      tessera="$root/build/$dir/tools/tessera-shardbench"
      break
    fi
  done
fi
if [[ -z "$tessera" ]]; then  # any other build but the sanitizers' (slow by design)
  for candidate in "$root"/build/*/tools/tessera-shardbench; do
    case "$candidate" in */build/asan/*|*/build/tsan/*) continue ;; esac
    if [[ -x "$candidate" ]]; then tessera="$candidate"; break; fi
  done
fi
[[ -n "$tessera" && -x "$tessera" ]] ||
  fail "no tessera-shardbench binary${tessera:+ at $tessera}; build it" \
       "(cmake --preset release && cmake --build build/release --target tessera-shardbench)" \
       "or pass --tessera PATH / TESSERA_SHARDBENCH"
"$python" -c 'import torch, torch.distributed' 2>/dev/null ||
  fail "'$python' cannot import torch; pass --python PATH / TORCH_PYTHON"
if [[ $threads -eq 0 ]]; then
  command -v mpirun >/dev/null || fail "no mpirun on PATH (or pass --threads)"
fi

read -ra torch_extra <<<"$torch_args"  # --torch-args: words

if [[ -z "$out" ]]; then out="$(mktemp -d)"; fi  # a new folder under $TMPDIR or /tmp
mkdir -p "$out"

# One intra-op thread per rank, as torch_strategies.py sets for each of its processes.
export OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

pairs=()
for ((run = 1; run <= runs; ++run)); do
  tjson="$out/tessera-$run.json" pjson="$out/torch-$run.json"
  if [[ $threads -eq 1 ]]; then
    cmd=("$tessera" --ranks "$ranks" --json "$tjson" "${common[@]}")
  else
    cmd=(mpirun -n "$ranks" --oversubscribe -x OMP_NUM_THREADS "$tessera" --json "$tjson"
         "${common[@]}")
  fi
  echo "== run $run of $runs: ${cmd[*]}"
  "${cmd[@]}" 2>&1 | tee "$out/tessera-$run.txt"
  pcmd=("$python" "$here/torch_strategies.py" --ranks "$ranks" --json "$pjson" "${common[@]}"
        "${torch_extra[@]}")
  echo "== run $run of $runs: ${pcmd[*]}"
  "${pcmd[@]}" 2>&1 | tee "$out/torch-$run.txt"
  [[ -s "$tjson" ]] || fail "tessera-shardbench wrote no $tjson (its log: $out/tessera-$run.txt)"
  [[ -s "$pjson" ]] || fail "torch_strategies.py wrote no $pjson (its log: $out/torch-$run.txt)"
  pairs+=("$tjson" "$pjson")
done

echo
echo "== side by side (files in $out)"
"$python" "$here/compare.py" "${pairs[@]}" | tee "$out/compare.txt"
