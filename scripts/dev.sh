#!/usr/bin/env bash
# qgemm's one script for the whole loop.
#
#   scripts/dev.sh examples   install what is missing, build, compile every spec
#                             in specs/ to PTX and print one line per kernel
#   scripts/dev.sh test       install what is missing, lint, build, run every
#                             CPU test
#   scripts/dev.sh lint       ruff check over the Python tree, clang-format
#                             over the C++ lines this change touches
#   scripts/dev.sh build      configure and build only (no installs)
#   scripts/dev.sh pack       build, then pack what the GPU machine needs into
#                             .pack/qgemm-gpu.tar.xz (git-ignored; carry it)
#   scripts/dev.sh gpu        on the GPU machine: unpack .pack/ and run the GPU
#                             tests (results under $OUT when set); a full run
#                             takes ~25 min on an H100, past one call's 10:
#                             QGEMM_GPU_SHARD=1/4 .. 4/4 splits it
#   scripts/dev.sh gpu-sanitize [FILTER...]
#                             on the GPU machine: compute-sanitizer memcheck and
#                             racecheck over a subset of the GPU tests
#   scripts/dev.sh gpu-bench [qgemmc bench options]
#                             on the GPU machine: the moe_suite benchmark
#   scripts/dev.sh gpu-python
#                             on the GPU machine: the Python package's GPU
#                             tests and launch-overhead benchmark (torch)
#   scripts/dev.sh gpu-jax [bench/jax_gmm.py options]
#                             on the GPU machine: qgemm.jax GPU tests, then
#                             bench/jax_gmm.py (gmm vs the batched einsum,
#                             Mosaic GPU and ragged_dot) and bench/jax_moe.py
#                             (moe_experts vs the bf16 JAX layer)
#   scripts/dev.sh gpu-jax-tests [PATTERN]
#                             on the GPU machine: the qgemm.jax GPU tests only
#                             (default 'test_jax_*.py'), no benchmark
#   scripts/dev.sh gpu-moe-bench [--quick]
#                             on the GPU machine: the PyTorch MoE layer
#                             benchmark (bench/moe_layer.py), qgemm vs bf16
#   scripts/dev.sh gpu-ep-tests
#                             on a machine with 2+ GPUs: qgemm.torch.ep's GPU
#                             tests, then examples/python/ep_train.py (torchrun)
#   scripts/dev.sh gpu-ep-bench [N] [bench/expert_parallel.py options]
#                             bench/expert_parallel.py on N GPUs (default all)
#   scripts/dev.sh gpu-train-bench [bench/train_op.py options]
#                             on the GPU machine: fp8_grouped_mm's training-step
#                             tests, then bench/train_op.py (qgemm vs bf16 vs
#                             torchao; torchao from a carried .whl/)
#   scripts/dev.sh gpu-qgemmc ARGS...
#                             on the GPU machine: the packed qgemmc (e.g. a
#                             bench of a tuning sweep in bench/sweeps/)
#
# Everything is idempotent: a second run installs nothing and rebuilds only
# what changed. Environment: BUILD_DIR (default build), JOBS (default nproc),
# PACK_DIR (default .pack; another git-ignored .pack-NAME/ lets several
# checkouts share one GPU machine, each carrying its own pack).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
JOBS="${JOBS:-$(nproc)}"
PACK_DIR="${PACK_DIR:-$ROOT/.pack}"
[[ "$PACK_DIR" = /* ]] || PACK_DIR="$ROOT/$PACK_DIR"
LLVM_BIN=/usr/lib/llvm-22/bin

# Debian 12 packages qgemm builds with (LLVM/MLIR 22 come from bookworm-security).
PACKAGES=(cmake ninja-build g++ python3 llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
          lld-22 libzstd-dev zlib1g-dev libfmt-dev nlohmann-json3-dev catch2 xz-utils
          pkg-config python3-venv python3-numpy  # install + Python package tests
          clang-format-22 git)  # lint

log() { printf '\033[1m[qgemm]\033[0m %s\n' "$*" >&2; }

install_deps() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  if ((${#missing[@]})); then
    log "installing: ${missing[*]}"
    local sudo=""
    [[ $(id -u) -eq 0 ]] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
  [[ -x /usr/local/cuda/bin/ptxas ]] ||
    log "warning: /usr/local/cuda/bin/ptxas not found; PTX checks need the CUDA toolkit"
}

# A venv with a CPU jax from PyPI for qgemm.jax: its FFI headers build
# libqgemm_xla.so and ctest's python-jax test runs with it, optax too
# (pure Python) for qgemm.jax.with_quantized_weights' tests.
jax_venv() {
  local venv="$BUILD_DIR/jax-venv"
  "$venv/bin/python" -c "import jax.ffi, optax" 2>/dev/null && return
  log "installing a CPU jax and optax into $venv"
  mkdir -p "$BUILD_DIR"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check jax numpy optax
}

# A venv with torch from PyPI for the CPU tests of qgemm.torch over
# torch.distributed's gloo backend (ctest's python-torch).
torch_venv() {
  local venv="$BUILD_DIR/torch-venv"
  "$venv/bin/python" -c "import torch.distributed" 2>/dev/null && return
  log "installing torch into $venv (about 5 GB)"
  mkdir -p "$BUILD_DIR"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "torch==2.11.*" numpy
}

# A venv with ruff from PyPI, pinned: a new release may add findings.
RUFF_VERSION=0.17.6
lint_venv() {
  local venv="$BUILD_DIR/lint-venv"
  [[ "$("$venv/bin/ruff" --version 2>/dev/null)" == "ruff $RUFF_VERSION" ]] && return
  log "installing ruff $RUFF_VERSION into $venv"
  mkdir -p "$BUILD_DIR"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "ruff==$RUFF_VERSION"
}

# The commit the change under test starts from, as a clean clone can tell:
# on a branch, where it left main (origin/main on CI, else a local main);
# on main itself, or without one, HEAD's parent (the first parent of a
# merge: everything the merge brought in). Empty when HEAD has no parent
# here (a depth-1 clone, the first commit).
lint_base() {
  local head ref base
  head=$(git -C "$ROOT" rev-parse HEAD)
  for ref in origin/main main; do
    if git -C "$ROOT" rev-parse -q --verify "$ref^{commit}" >/dev/null; then
      base=$(git -C "$ROOT" merge-base "$ref" HEAD 2>/dev/null) || base=""
      [[ -n "$base" && "$base" != "$head" ]] && { echo "$base"; return; }
      break
    fi
  done
  git -C "$ROOT" rev-parse -q --verify "HEAD^1^{commit}" 2>/dev/null || true
}

# clang-format --dry-run over the lines of the C++ files changed since
# lint_base, so the check holds new code to the style without asking for
# the untouched lines of a file to be reformatted.
lint_cxx() {
  local base file args start count
  base=$(lint_base)
  if [[ -z "$base" ]]; then
    log "lint: HEAD has no parent commit here (shallow clone?); C++ not checked"
    return
  fi
  local cf="$LLVM_BIN/clang-format" failed=0 n=0
  # A moved file is diffed against its old path, so that only the lines the
  # move changed are checked, not the whole file as if it were new.
  local -A from=()
  local status old new
  while IFS=$'\t' read -r status old new; do
    from[$new]=$old
  done < <(git -C "$ROOT" diff -M --name-status --diff-filter=R "$base" HEAD -- \
             '*.cpp' '*.h' '*.c' '*.cu')
  while IFS= read -r file; do
    args=()
    # Hunk headers "@@ -a,b +start[,count] @@": the new side's lines.
    while read -r start count; do
      ((count == 0)) || args+=("--lines=$start:$((start + count - 1))")
    done < <(git -C "$ROOT" diff -U0 -M "$base" HEAD -- ${from[$file]:+"${from[$file]}"} "$file" |
             sed -nE 's/^@@ [^+]*\+([0-9]+)(,([0-9]+))? @@.*/\1 \3/p' |
             awk '{print $1, ($2 == "" ? 1 : $2)}')
    ((${#args[@]})) || continue
    n=$((n + 1))
    (cd "$ROOT" && "$cf" --dry-run --Werror "${args[@]}" "$file") || failed=1
  done < <(git -C "$ROOT" diff --name-only --diff-filter=AMR "$base" HEAD -- \
             '*.cpp' '*.h' '*.c' '*.cu')
  log "lint: clang-format checked the changed lines of $n C++ files since ${base:0:12}"
  return $failed
}

lint() {
  log "lint: ruff check"
  "$BUILD_DIR/lint-venv/bin/ruff" check --config "$ROOT/ruff.toml" "$ROOT" || {
    log "lint: ruff check failed"; exit 1; }
  lint_cxx || { log "lint: clang-format failed (see $ROOT/.clang-format)"; exit 1; }
}

build() {
  local t0=$SECONDS
  # Configure once, and again when a jax venv appeared after a configure
  # that found no XLA FFI headers (examples before test): the JAX handlers
  # are only built from a configure that sees them.
  if [[ ! -f "$BUILD_DIR/build.ninja" ]] ||
     { [[ -x "$BUILD_DIR/jax-venv/bin/python" ]] &&
       ! grep -q libqgemm_xla "$BUILD_DIR/build.ninja"; }; then
    log "configuring $BUILD_DIR"
    cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  log "building with $JOBS jobs (a cold build takes several minutes on 2 cores)"
  cmake --build "$BUILD_DIR" -j "$JOBS" || { log "build failed"; exit 1; }
  log "build done in $((SECONDS - t0)) s"
}

run_examples() {
  "$BUILD_DIR/bin/qgemmc" build "$ROOT"/specs/*.json -o "$BUILD_DIR/ptx"
}

run_tests() {
  ctest --test-dir "$BUILD_DIR" --output-on-failure -LE gpu
}

pack() {
  local dir="$PACK_DIR" stage
  stage="$(mktemp -d)"
  mkdir -p "$dir" "$stage/qgemm/bin" "$stage/qgemm/lib"
  cp "$BUILD_DIR/lib/libqgemm.so" "$stage/qgemm/lib/"
  # The XLA FFI handlers for qgemm.jax (built when jaxlib's headers are found).
  [[ -f "$BUILD_DIR/lib/libqgemm_xla.so" ]] && cp "$BUILD_DIR/lib/libqgemm_xla.so" "$stage/qgemm/lib/"
  for b in qgemmc qgemm-gpu-tests qgemm-gpu-dispatch-tests qgemm-gpu-chain-tests; do
    [[ -x "$BUILD_DIR/bin/$b" ]] && cp "$BUILD_DIR/bin/$b" "$stage/qgemm/bin/"
  done
  cp -r "$ROOT/specs" "$stage/qgemm/"
  cp -r "$ROOT/tests/gpu/specs" "$stage/qgemm/gpu-specs"
  cp -r "$ROOT/bench/sweeps" "$stage/qgemm/sweeps"
  # The shipped tuning databases: lib/../tuning is where "auto" finds them.
  cp -r "$ROOT/tuning" "$stage/qgemm/tuning"
  cp -r "$ROOT/python" "$stage/qgemm/python"
  # The MoE layer example (python/tests/gpu/test_moe_layer.py imports it by
  # path) and its benchmark, at the same relative paths.
  mkdir -p "$stage/qgemm/examples" "$stage/qgemm/bench"
  cp -r "$ROOT/examples/python" "$stage/qgemm/examples/python"
  cp -r "$ROOT/examples/jax" "$stage/qgemm/examples/jax"
  cp "$ROOT/bench/moe_layer.py" "$ROOT/bench/train_op.py" "$ROOT/bench/host_overhead.py" \
    "$ROOT/bench/train_op_profile.py" "$ROOT/bench/jax_gmm.py" "$ROOT/bench/jax_moe.py" \
    "$ROOT/bench/expert_parallel.py" "$ROOT/bench/results_file.py" "$ROOT/bench/step_chart.py" \
    "$stage/qgemm/bench/"
  git -C "$ROOT" describe --always --dirty --abbrev=40 >"$stage/qgemm/COMMIT" 2>/dev/null || true
  cp "$ROOT/bench/moe_suite.json" "$stage/qgemm/"
  tar -C "$stage" -cJf "$dir/qgemm-gpu.tar.xz" qgemm
  rm -rf "$stage"
  log "packed $(du -h "$dir/qgemm-gpu.tar.xz" | cut -f1) into $dir/qgemm-gpu.tar.xz"
}

unpack() {
  dest=/tmp/qgemm-gpu out="${OUT:-$PACK_DIR/out}"
  # A warm machine keeps the last unpacked build; reuse it only when it came
  # from this very pack (another checkout may have run in between).
  local stamp
  stamp=$(md5sum "$PACK_DIR/qgemm-gpu.tar.xz" | cut -d' ' -f1)
  if [[ -x "$dest/qgemm/bin/qgemmc" && "$(cat "$dest/.stamp" 2>/dev/null)" == "$stamp" ]]; then
    mkdir -p "$out"
    return
  fi
  rm -rf "$dest" && mkdir -p "$dest" "$out"
  tar -C "$dest" -xJf "$PACK_DIR/qgemm-gpu.tar.xz"
  echo "$stamp" >"$dest/.stamp"
}

# Every GPU step runs under a time limit: a hung kernel must end the run
# with a message, not eat the lease.
with_timeout() {
  timeout -k 5 "${QGEMM_GPU_TIMEOUT:-420}" "$@"
}

gpu_bench() {
  unpack
  mkdir -p "$out/bench"
  with_timeout "$dest/qgemm/bin/qgemmc" bench \
    --suite "$dest/qgemm/moe_suite.json" --out "$out/bench" "$@"
}

# The packed qgemmc, run from the unpacked folder (specs/, sweeps/,
# moe_suite.json are relative paths there), e.g.
#   dev.sh gpu-qgemmc bench sweeps/tiles_n4096_k7168.json --groups 8 --m 4096
gpu_qgemmc() {
  unpack
  (cd "$dest/qgemm" && QGEMM_CACHE_DIR="$dest/cache" \
    with_timeout ./bin/qgemmc "$@")
}

# The Python package against the packed libqgemm.so, with the machine's
# torch: GPU tests, then the launch-overhead numbers (the target: <= 10 us).
gpu_python() {
  unpack
  (cd "$dest/qgemm" && export QGEMM_LIBRARY="$dest/qgemm/lib/libqgemm.so" \
     PYTHONPATH="$dest/qgemm/python" QGEMM_CACHE_DIR="$dest/cache" &&
   with_timeout python3 -m unittest discover -v -s python/tests/gpu &&
   with_timeout python3 python/bench/launch_overhead.py --json "$out/launch-overhead.json")
}

# qgemm.jax with the machine's JAX: its GPU tests, then bench/jax_gmm.py;
# the bench runs even when a test fails.
gpu_jax() {
  unpack
  local rc=0
  (cd "$dest/qgemm" && export QGEMM_LIBRARY="$dest/qgemm/lib/libqgemm.so" \
     PYTHONPATH="$dest/qgemm/python" QGEMM_CACHE_DIR="$dest/cache" &&
   { with_timeout python3 -m unittest discover -v -s python/tests/gpu \
       -p 'test_jax_*.py' 2>&1 | tee "$out/jax-tests.txt"; rc=${PIPESTATUS[0]}; } &&
   with_timeout python3 bench/jax_gmm.py --out "$out/jax-gmm.json" "$@" &&
   with_timeout python3 bench/jax_moe.py --out "$out/jax-moe.json" &&
   exit $rc)
}

gpu_jax_tests() {
  unpack
  (cd "$dest/qgemm" && export QGEMM_LIBRARY="$dest/qgemm/lib/libqgemm.so" \
     PYTHONPATH="$dest/qgemm/python" QGEMM_CACHE_DIR="$dest/cache" &&
   with_timeout python3 -m unittest discover -v -s python/tests/gpu \
     -p "${1:-test_jax_*.py}" 2>&1 | tee -a "$out/jax-tests.txt"
   exit "${PIPESTATUS[0]}")
}

# The PyTorch MoE layer benchmark (~4 min on an H100, compiles included).
# qgemm.torch.ep on 2 GPUs: its GPU tests, then the torchrun example.
gpu_ep_tests() {
  unpack
  (cd "$dest/qgemm" && export QGEMM_LIBRARY="$dest/qgemm/lib/libqgemm.so" \
     PYTHONPATH="$dest/qgemm/python" QGEMM_CACHE_DIR="$dest/cache" NCCL_NVLS_ENABLE=0 &&
   with_timeout python3 -m unittest -v python/tests/gpu/test_ep_layer.py &&
   with_timeout torchrun --nproc-per-node 2 examples/python/ep_train.py)
}
# bench/expert_parallel.py on N GPUs (default: all of them).
gpu_ep_bench() {
  unpack
  local n="${1:-$(nvidia-smi -L | wc -l)}"; shift || true
  (cd "$dest/qgemm" && export QGEMM_LIBRARY="$dest/qgemm/lib/libqgemm.so" \
     PYTHONPATH="$dest/qgemm/python" QGEMM_CACHE_DIR="$dest/cache" NCCL_NVLS_ENABLE=0 &&
   with_timeout torchrun --nproc-per-node "$n" bench/expert_parallel.py \
     --out "$out/expert-parallel-ep$n.json" "$@")
}
gpu_moe_bench() {
  unpack
  (cd "$dest/qgemm" && export QGEMM_LIBRARY="$dest/qgemm/lib/libqgemm.so" \
     PYTHONPATH="$dest/qgemm/python" QGEMM_CACHE_DIR="$dest/cache" &&
   with_timeout python3 bench/moe_layer.py --out "$out/moe-layer.json" "$@")
}

# fp8_grouped_mm as a training op: its GPU tests
# (test_train_step.py), then bench/train_op.py against bf16 and torchao's FP8
# rowwise. torchao: the wheels in .whl/ (git-ignored; carry it with .pack),
# installed into /tmp/site; without them the bench skips that path. The bench
# runs even when a test fails; the status is the tests' or else the bench's.
gpu_train_bench() {
  unpack
  local site=/tmp/site
  if compgen -G "$ROOT/.whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --upgrade --target "$site" "$ROOT"/.whl/*.whl
  fi
  (cd "$dest/qgemm" && export QGEMM_LIBRARY="$dest/qgemm/lib/libqgemm.so" \
     PYTHONPATH="$site:$dest/qgemm/python" QGEMM_CACHE_DIR="$dest/cache" &&
   rc=0 &&
   { with_timeout python3 -m unittest discover -v -s python/tests/gpu \
       -p test_train_step.py || rc=$?; } &&
   with_timeout python3 bench/train_op.py --out "$out/" "$@" && exit $rc)
}

# One spec of each kernel family, grouping and tile variant (straddled B
# scales, clusters); a few cases each.
SANITIZE_FILTERS=(
  "t_mcontig_offsets__a.scale.layout=COMPACT__b.scale.layout=COMPACT__d.dtype=bf16__grouping.alignment=128"
  "t_mcontig_offsets__a.scale.layout=GEMM_READY__b.scale.layout=GEMM_READY__d.dtype=f32__grouping.alignment=16"
  "t_mcontig_rowgroup__a.scale.layout=GEMM_READY__d.padding_rows=untouched__grouping.alignment=32"
  "t_masked__a.scale.layout=COMPACT__b.scale.layout=GEMM_READY__d.dtype=bf16__d.padding_rows=zero"
  "t_wgrad_acc__a.scale.layout=GEMM_READY__b.scale.layout=COMPACT"
  "t_wgrad__a.scale.layout=COMPACT__b.scale.layout=GEMM_READY__grouping.alignment=256"
  "t_tuned__a.scale.layout=GEMM_READY__tuning.block_n=192__tuning.raster=n"
  "t_cluster__a.scale.layout=COMPACT__tuning.block_n=192__tuning.num_sms=4"
  "t_cluster_masked__d.padding_rows=untouched__tuning.block_n=144"
  "t_mxfp8__a.dtype=e4m3__a.scale.layout=GEMM_READY__b.scale.layout=COMPACT"
  "t_dense__a.dtype=e5m2__b.dtype=e4m3__d.dtype=bf16"
  # Alignment 1 and 16 groups, MXFP8 with accumulation / odd n / restarted
  # token blocks.
  "t_mcontig_offsets__a.scale.layout=GEMM_READY__b.scale.layout=COMPACT__d.dtype=bf16__grouping.alignment=1"
  "t_mxfp8_align__a.scale.layout=COMPACT__d.dtype=bf16__d.padding_rows=zero__grouping.alignment=16"
  "t_fwd_acc_mcontig__d.padding_rows=untouched__grouping.alignment=16__grouping.index=row_group__shape.n=321"
  "t_mxfp8_acc_odd__grouping.index=row_group__shape.n=321"
  "t_mxfp8_wgrad__a.scale.layout=GEMM_READY__b.scale.layout=COMPACT__grouping.alignment=16"
  "t_wgrad16_acc"
  "t_quantize_1x128"
  "t_quantize_mx"
  # The fused data path: gathered weighted rows (a sources kernel, then the
  # rows' tokens staged through shared memory) and the quantized SwiGLU
  # backward.
  "t_quantize_gather__columnwise.layout=GEMM_READY__gather.probs=true__recipe=deepseek"
  "t_swiglu_backward_quantize__columnwise.layout=GEMM_READY__halves=stacked__recipe=deepseek__rowwise.layout=COMPACT")

gpu_sanitize() {
  unpack
  (($#)) && SANITIZE_FILTERS=("$@")
  local san
  san="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  local logs=/tmp/qgemm-sanitize failed=0 i=0
  mkdir -p "$logs"
  for tool in memcheck racecheck; do
    for f in "${SANITIZE_FILTERS[@]}"; do
      i=$((i + 1))
      # Each spec under its own limit: a hang ends that spec, not the lease.
      if QGEMM_CACHE_DIR="$dest/cache" timeout -k 5 "${QGEMM_SANITIZE_TIMEOUT:-120}" \
          "$san" --tool "$tool" --error-exitcode 3 \
          "$dest/qgemm/bin/qgemm-gpu-tests" --specs "$dest/qgemm/gpu-specs" \
          --filter "$f" --max-cases 4 --no-latency --out "$logs" \
          >"$logs/$i.log" 2>&1; then
        echo "$tool clean ($(grep -c '^ok ' "$logs/$i.log") cases): $f"
      else
        echo "$tool FAILED: $f"; failed=1
        tail -20 "$logs/$i.log"
      fi
    done
  done
  # The dispatch stages: memcheck (out-of-bounds global accesses, the error
  # path's routings included) and synccheck (their ballots, shuffles and
  # barrier run on whole warps / CTAs). They use no shared memory, so
  # racecheck has nothing to look at.
  if [[ -x "$dest/qgemm/bin/qgemm-gpu-dispatch-tests" ]]; then
    for tool in memcheck synccheck; do
      i=$((i + 1))
      if QGEMM_CACHE_DIR="$dest/cache" timeout -k 5 "${QGEMM_SANITIZE_TIMEOUT:-120}" \
          "$san" --tool "$tool" --error-exitcode 3 \
          "$dest/qgemm/bin/qgemm-gpu-dispatch-tests" --specs "$dest/qgemm/gpu-specs" \
          >"$logs/$i.log" 2>&1; then
        echo "$tool clean ($(grep -c '^ok ' "$logs/$i.log") cases): dispatch"
      else
        echo "$tool FAILED: dispatch"; failed=1
        tail -20 "$logs/$i.log"
      fi
    done
  fi
  return $failed
}

gpu() {
  unpack
  # QGEMM_GPU_ONLY="mxfp8_wgrad quantize_mx ..." runs only those spec files
  # (stems from tests/gpu/specs/; "specs" adds the bundled specs/, "chain"
  # the layer chain test): a run too long for one device call is split.
  local spec_dirs=(--specs "$dest/qgemm/gpu-specs" --specs "$dest/qgemm/specs")
  # QGEMM_GPU_SHARD=i/n: the i-th of n interleaved shares of the spec files
  # (the bundled specs/ go with share 1), one device call each.
  if [[ -n "${QGEMM_GPU_SHARD:-}" ]]; then
    local i=${QGEMM_GPU_SHARD%/*} n=${QGEMM_GPU_SHARD#*/} f j=0
    QGEMM_GPU_ONLY=""
    ((i == 1)) && QGEMM_GPU_ONLY="specs"
    for f in "$dest"/qgemm/gpu-specs/*.json; do
      ((j % n == i - 1)) && QGEMM_GPU_ONLY+=" $(basename "$f" .json)"
      j=$((j + 1))
    done
  fi
  if [[ -n "${QGEMM_GPU_ONLY:-}" ]]; then
    # A folder of this run's own: runs in parallel on one machine each
    # pick their spec files.
    local only s
    only=$(mktemp -d "$dest/only.XXXXXX")
    spec_dirs=(--specs "$only")
    for s in $QGEMM_GPU_ONLY; do
      if [[ "$s" == specs ]]; then spec_dirs+=(--specs "$dest/qgemm/specs")
      elif [[ "$s" != chain ]]; then cp "$dest/qgemm/gpu-specs/$s.json" "$only/"; fi
    done
  fi
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv | tee "$out/device.txt"
  ldd "$dest/qgemm/lib/libqgemm.so" | tee "$out/ldd.txt"
  "$dest/qgemm/bin/qgemmc" build "$dest"/qgemm/specs/*.json | tee "$out/build.txt"
  if [[ -x "$dest/qgemm/bin/qgemm-gpu-tests" ]]; then
    mkdir -p "$out/tests"
    # Line-buffered so the log shows how far a timed-out run got.
    QGEMM_CACHE_DIR="$dest/cache" with_timeout \
      stdbuf -oL -eL "$dest/qgemm/bin/qgemm-gpu-tests" \
      "${spec_dirs[@]}" --out "$out/tests" "$@" ||
      { rc=$?; ((rc == 124 || rc == 137)) && echo "GPU tests timed out (hung kernel?)"; return $rc; }
  fi
  if [[ -x "$dest/qgemm/bin/qgemm-gpu-dispatch-tests" ]]; then
    QGEMM_CACHE_DIR="$dest/cache" with_timeout \
      stdbuf -oL -eL "$dest/qgemm/bin/qgemm-gpu-dispatch-tests" \
      "${spec_dirs[@]}" | tee "$out/dispatch.txt"
  fi
  # The layer chain (its specs are built in): with the full run, share 1, or
  # "chain" in QGEMM_GPU_ONLY.
  if [[ ( -z "${QGEMM_GPU_ONLY:-}" || "${QGEMM_GPU_SHARD:-}" == 1/* ||
          " $QGEMM_GPU_ONLY " == *" chain "* ) && -x "$dest/qgemm/bin/qgemm-gpu-chain-tests" ]]; then
    QGEMM_CACHE_DIR="$dest/cache" with_timeout \
      stdbuf -oL -eL "$dest/qgemm/bin/qgemm-gpu-chain-tests" | tee "$out/chain.txt"
  fi
}

cmd="${1:-}"
shift || true
case "$cmd" in
  examples) install_deps; build; run_examples ;;
  test) install_deps; jax_venv; torch_venv; lint_venv; lint; build; run_tests ;;
  lint) lint_venv; lint ;;
  build) build ;;
  pack) build; pack ;;
  gpu) gpu "$@" ;;
  gpu-bench) gpu_bench "$@" ;;
  gpu-qgemmc) gpu_qgemmc "$@" ;;
  gpu-python) gpu_python ;;
  gpu-jax) gpu_jax "$@" ;;
  gpu-jax-tests) gpu_jax_tests "$@" ;;
  gpu-moe-bench) gpu_moe_bench "$@" ;;
  gpu-ep-tests) gpu_ep_tests ;;
  gpu-ep-bench) gpu_ep_bench "$@" ;;
  gpu-train-bench) gpu_train_bench "$@" ;;
  gpu-sanitize) gpu_sanitize "$@" ;;
  *) sed -n '2,34p' "$0"; exit 1 ;;
esac
