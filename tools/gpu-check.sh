#!/usr/bin/env bash
# Builds Tessera's CUDA path on a GPU machine and checks it in one go: configure (Release, CUDA,
# header-only dependencies from build/gpu-deps, no oneDNN, no MPI), build only tessera,
# cuda_tests and cuda_bench, run the CUDA tests (counting passes and failures, going on after
# failures), run bench/cuda_bench and torch.matmul when PyTorch is importable, then print a
# summary table last. Run from anywhere; it works in the repository it belongs to.
#
#   tools/prepare-gpu-deps.sh     # on a machine with the Debian packages: fills build/gpu-deps
#   tools/gpu-check.sh            # on the GPU machine, with build/gpu-deps carried over
#
# Environment: OUT (a folder: the whole output also goes to $OUT/gpu-check.txt, the build log to
# $OUT/gpu-check-build.log), TESSERA_DEPS_DIR (default build/gpu-deps; without that folder the
# system's packages are used), CUDA_ARCHS (default "90-real;90-virtual"), BUILD_DIR (default
# build/gpu-check), JOBS (default 16).
# Exit status: 0 when everything built, every CUDA test passed and the benchmark ran; the
# performance targets are reported, never enforced (timing never decides a test).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deps_dir="${TESSERA_DEPS_DIR:-${repo_root}/build/gpu-deps}"
build_dir="${BUILD_DIR:-${repo_root}/build/gpu-check}"
archs="${CUDA_ARCHS:-90-real;90-virtual}"
jobs="${JOBS:-16}"

t_start=$(date +%s)
t_phase=${t_start}
phase_times=()
# Records the seconds since the previous phase ended under the name $1.
end_phase() {
  local now
  now=$(date +%s)
  phase_times+=("$1 $((now - t_phase))s")
  echo "--- $1: $((now - t_phase)) s (total $((now - t_start)) s)"
  t_phase=${now}
}

# "13000" -> "13.0"
cuda_version() { echo "$(($1 / 1000)).$((($1 % 1000) / 10))"; }

# Field $2.. of the first CSV line of the benchmark's output starting with $1.
csv_field() { grep -m1 "^$1," "${bench_csv}" | cut -d, -f"$2" || true; }

# 100 * $1 / $2 with one decimal, or "-" when either is missing.
percent() {
  if [[ -z "$1" || -z "$2" ]]; then echo "-"; else awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", 100 * a / b }'; fi
}

# "met" or "MISSED" for a percentage against a target.
verdict() {
  if [[ "$1" == "-" ]]; then echo "not measured"; else awk -v p="$1" -v t="$2" 'BEGIN { print (p >= t ? "met" : "MISSED") }'; fi
}

check() {
  if ! { nvidia-smi -L >/dev/null 2>&1 || compgen -G "/dev/nvidia[0-9]*" >/dev/null; }; then
    echo "no CUDA device: gpu-check needs a GPU"
    return 0
  fi
  echo "gpu-check: $(date -u +%Y-%m-%dT%H:%M:%SZ) in ${repo_root} ($(git -C "${repo_root}" rev-parse --short HEAD 2>/dev/null || echo 'no git'))"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null || true

  local deps_args=()
  if [[ -f "${deps_dir}/README.md" ]]; then
    deps_args=(-DTESSERA_DEPS_DIR="${deps_dir}")
  else
    echo "gpu-check: no ${deps_dir}/README.md (tools/prepare-gpu-deps.sh): using the system's packages"
  fi
  local generator=()
  if command -v ninja >/dev/null; then generator=(-G Ninja); fi
  local build_log="${build_dir}/gpu-check-build.log"
  mkdir -p "${build_dir}"

  local configure_ok=1
  cmake -S "${repo_root}" -B "${build_dir}" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DTESSERA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${archs}" "${deps_args[@]}" \
    -DTESSERA_ONEDNN=OFF -DTESSERA_MPI=OFF -DTESSERA_BUILD_TESTS=ON \
    -DTESSERA_BUILD_BENCH=ON >"${build_log}" 2>&1 || configure_ok=0
  grep -E "^-- (Tessera|The CUDA compiler)" "${build_log}" || true
  end_phase configure

  # Tests and benchmark build separately, so that one failing does not take the other down;
  # -k 0 shows every compile error at once.
  local keep_going=()
  if [[ ${#generator[@]} -gt 0 ]]; then keep_going=(-- -k 0); fi
  local tests_built=0 bench_built=0
  if [[ ${configure_ok} -eq 1 ]]; then
    cmake --build "${build_dir}" -j "${jobs}" --target tessera cuda_tests "${keep_going[@]}" \
      >>"${build_log}" 2>&1 && tests_built=1
    cmake --build "${build_dir}" -j "${jobs}" --target cuda_bench "${keep_going[@]}" \
      >>"${build_log}" 2>&1 && bench_built=1
  fi
  echo "build: $(grep -c "warning:" "${build_log}" || true) warning lines, log in ${build_log}"
  if [[ ${configure_ok} -eq 0 || ${tests_built} -eq 0 || ${bench_built} -eq 0 ]]; then
    echo "BUILD FAILED (configure ok=${configure_ok}, cuda_tests built=${tests_built}, cuda_bench built=${bench_built}); errors:"
    grep -E -A3 "error|Error|FAILED" "${build_log}" | head -150 || true
  fi
  if [[ -n "${OUT:-}" ]]; then cp "${build_log}" "${OUT}/gpu-check-build.log"; fi
  end_phase build

  local tests_summary="not built" tests_ok=0
  if [[ ${tests_built} -eq 1 ]]; then
    local tests_out="${build_dir}/cuda_tests.txt" rc=0
    timeout 180 "${build_dir}/tests/cuda_tests" 2>&1 | tee "${tests_out}" || rc=$?
    local skipped
    skipped=$(grep -c "skipped: no CUDA device" "${tests_out}" || true)
    if grep -q "^All tests passed" "${tests_out}"; then
      tests_summary="$(sed -n 's/^All tests passed (.* in \([0-9]*\) test cases*)/\1/p' "${tests_out}") passed, 0 failed"
      tests_ok=$((rc == 0 && skipped == 0))
    elif grep -q "^test cases:" "${tests_out}"; then
      local line
      line=$(grep -m1 "^test cases:" "${tests_out}")
      tests_summary="$(grep -o "[0-9]* passed" <<<"${line}" || echo "0 passed"), $(grep -o "[0-9]* failed" <<<"${line}")"
    else
      tests_summary="no Catch2 summary (exit status ${rc}: crashed or timed out)"
    fi
    if [[ ${skipped} -gt 0 ]]; then tests_summary+=", ${skipped} skipped as if no device"; fi
  fi
  end_phase cuda_tests

  bench_csv="${build_dir}/cuda_bench.csv"
  : >"${bench_csv}"
  local bench_ok=0
  if [[ ${bench_built} -eq 1 ]]; then
    timeout 150 "${build_dir}/bench/cuda_bench" --csv 2>&1 | tee "${bench_csv}" && bench_ok=1
  fi
  end_phase cuda_bench

  local torch_bf16="" torch_f32="" torch_version=""
  if python3 -c "import torch" >/dev/null 2>&1; then
    local torch_out
    torch_out=$(timeout 120 python3 - <<'PY' 2>&1 || true
import torch

def tflops(dtype, n=8192, iters=20, batches=5):
    a = torch.rand(n, n, device="cuda", dtype=dtype)
    b = torch.rand(n, n, device="cuda", dtype=dtype)
    for _ in range(3):
        torch.matmul(a, b)
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(batches):
        start.record()
        for _ in range(iters):
            torch.matmul(a, b)
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop) / iters)
    ms = sorted(times)[batches // 2]
    return 2 * n**3 / (ms * 1e-3) / 1e12

torch.backends.cuda.matmul.allow_tf32 = False  # full float32, as Tessera and the bench's cuBLAS
print(f"torch,{torch.__version__},{tflops(torch.bfloat16):.1f},{tflops(torch.float32, iters=4):.1f}")
PY
)
    echo "${torch_out}"
    local torch_line
    torch_line=$(grep -m1 "^torch," <<<"${torch_out}" || true)
    torch_version=$(cut -d, -f2 <<<"${torch_line}")
    torch_bf16=$(cut -d, -f3 <<<"${torch_line}")
    torch_f32=$(cut -d, -f4 <<<"${torch_line}")
  else
    echo "torch: not importable, skipped"
  fi
  end_phase torch

  local name driver runtime cc sms
  name=$(csv_field device 2)
  driver=$(csv_field device 3)
  runtime=$(csv_field device 4)
  cc=$(csv_field device 5)
  sms=$(csv_field device 6)
  local memcpy add32 add16 add32p add16p
  memcpy=$(csv_field "bw,memcpy" 6)
  add32=$(csv_field "bw,add_fresh,float32" 6)
  add16=$(csv_field "bw,add_fresh,bfloat16" 6)
  add32p=$(csv_field "bw,add_prealloc,float32" 6)
  add16p=$(csv_field "bw,add_prealloc,bfloat16" 6)
  local ts16 lt16 cb16 ts32 lt32 cb32 chk16 chk32
  ts16=$(csv_field "gemm,tessera,bfloat16,8192" 6)
  lt16=$(csv_field "gemm,cublaslt,bfloat16,8192" 6)
  cb16=$(csv_field "gemm,cublas,bfloat16,8192" 6)
  ts32=$(csv_field "gemm,tessera,float32,8192" 6)
  lt32=$(csv_field "gemm,cublaslt,float32,8192" 6)
  cb32=$(csv_field "gemm,cublas,float32,8192" 6)
  chk16=$(csv_field "check,bfloat16,8192" 4)
  chk32=$(csv_field "check,float32,8192" 4)
  local p_add32 p_add16 p_g16 p_g32
  p_add32=$(percent "${add32}" "${memcpy}")
  p_add16=$(percent "${add16}" "${memcpy}")
  p_g16=$(percent "${ts16}" "${lt16}")
  p_g32=$(percent "${ts32}" "${cb32}")

  echo
  echo "================================ gpu-check summary ================================"
  printf '%-22s %s\n' "device" "${name:-?} (sm_${cc:-?}, ${sms:-?} SMs)"
  printf '%-22s %s\n' "driver / runtime" "$(cuda_version "${driver:-0}") / $(cuda_version "${runtime:-0}") (CUDA API versions)"
  printf '%-22s %s\n' "cuda_tests" "${tests_summary}"
  printf '%-22s %s\n' "memcpy D2D 1 GiB" "${memcpy:--} GB/s (2 x bytes / time)"
  printf '%-22s %s\n' "add float32 256 MiB" "${add32:--} GB/s = ${p_add32}% of memcpy, target >= 85%: $(verdict "${p_add32}" 85) (a + b, output from the caching allocator; into a preallocated output: ${add32p:--} GB/s)"
  printf '%-22s %s\n' "add bfloat16 256 MiB" "${add16:--} GB/s = ${p_add16}% of memcpy, target >= 85%: $(verdict "${p_add16}" 85) (preallocated: ${add16p:--} GB/s)"
  printf '%-22s %s\n' "GEMM bf16 8192^3" "tessera ${ts16:--} TFLOP/s = ${p_g16}% of cuBLASLt ${lt16:--}, target >= 90%: $(verdict "${p_g16}" 90); cublasGemmEx ${cb16:--}; torch ${torch_bf16:--} ($(percent "${ts16}" "${torch_bf16}")%); max rel. diff vs cuBLASLt ${chk16:--}"
  printf '%-22s %s\n' "GEMM f32 8192^3" "tessera ${ts32:--} TFLOP/s = ${p_g32}% of cublasGemmEx ${cb32:--}; cuBLASLt ${lt32:--}; torch ${torch_f32:--} ($(percent "${ts32}" "${torch_f32}")%); max rel. diff vs cuBLASLt ${chk32:--}"
  printf '%-22s %s\n' "torch" "${torch_version:-not available}"
  printf '%-22s %s\n' "phases" "${phase_times[*]}; total $(($(date +%s) - t_start)) s"

  if [[ ${configure_ok} -eq 1 && ${tests_built} -eq 1 && ${bench_built} -eq 1 && ${tests_ok} -eq 1 && ${bench_ok} -eq 1 ]]; then
    echo "gpu-check: OK"
    return 0
  fi
  echo "gpu-check: FAILED (see above)"
  return 1
}

if [[ -n "${OUT:-}" ]]; then
  mkdir -p "${OUT}"
  check 2>&1 | tee "${OUT}/gpu-check.txt"
  exit "${PIPESTATUS[0]}"
fi
check
