#!/usr/bin/env bash
# The GPU box recipe in one go: builds against a CUDA LibTorch, runs the model and trainer tests on
# CUDA, benchmarks forward / generate / grpo-step on the GPU, trains the demo for a few steps, and
# writes every figure to one JSON file.
#
# Two LibTorch sources, picked by what is installed:
#   Debian 13's own (libtorch-cuda-dev 2.6 + nvidia-cuda-toolkit 12.4 + nvidia-cudnn, from contrib
#     and non-free; no pip): used when libtorch-cuda-dev is installed and TORCH_PREFIX is unset.
#     GPU_CHECK_INSTALL=1 on Debian 13 installs them (scripts/setup.sh --demo --cuda).
#   PyTorch's wheel (torch >= 2.7 with CUDA in $PYTHON, its LibTorch), or a LibTorch folder in
#     TORCH_PREFIX: everywhere else (Debian 12, Ubuntu, ...).
#
# Usage: scripts/gpu_check.sh [OUT_DIR]          (default: build/cuda/gpu-check)
#   PYTHON=python3        the interpreter whose torch (2.x, a CUDA build) is used; with Debian's
#                         LibTorch only for PyTorch's side of bench grpo-step (python3-torch-cuda)
#   GPU_CHECK_STEPS=40    demo steps;  GPU_CHECK_SIZE=100m  benchmark model size (tiny, 25m, 100m)
#   GPU_CHECK_INSTALL=1   first install the build dependencies with apt: scripts/setup.sh --demo
#                         --cuda on Debian 13 without a pip torch, else --demo --no-libtorch
# Needs: an NVIDIA driver (nvidia-smi); NVIDIA's cuDNN 9 (Debian: nvidia-cudnn, which downloads it);
# for the wheel, PyTorch >= 2.7 (its LibTorch uses the C++11 ABI that Debian's Qt and yaml-cpp use)
# and the CUDA toolkit's nvcc matching torch.version.cuda (PyTorch's CMake config looks for it);
# cmake >= 3.25, Ninja, g++ >= 11, and for everything but the benchmarks Qt >= 6.4. Without Qt it
# builds the engine-only `grpo` (bench, inspect) and says what it skipped. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-build/cuda/gpu-check}"
PY="${PYTHON:-python3}"
BUILD=build/cuda
STEPS="${GPU_CHECK_STEPS:-40}"
SIZE="${GPU_CHECK_SIZE:-100m}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

say() { echo "gpu_check: $*"; }
die() {  # die WHAT FIX
  echo "gpu_check: FAIL: $1" >&2
  [ -z "${2:-}" ] || echo "gpu_check: fix: $2" >&2
  exit 1
}
debian_torch() { [ -z "${TORCH_PREFIX:-}" ] && dpkg-query -W -f='${Status}' libtorch-cuda-dev 2>/dev/null | grep -q "install ok installed"; }
py_torch() { command -v "$PY" >/dev/null && "$PY" -c "import torch" 2>/dev/null; }
release="$( (. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}") || true)"
if [ "${GPU_CHECK_INSTALL:-0}" = 1 ]; then
  if [ "$release" = trixie ] && [ -z "${TORCH_PREFIX:-}" ] && ! py_torch; then scripts/setup.sh --demo --cuda
  else scripts/setup.sh --demo --no-libtorch; fi
fi

# ---- 1. preflight: fail early, with the fix ----
command -v nvidia-smi >/dev/null ||
  die "nvidia-smi not found: no NVIDIA driver" "install the NVIDIA driver (Debian: nvidia-driver from non-free-firmware, or NVIDIA's installer) and reboot"
nvidia-smi -L >"$OUT/nvidia-smi.txt" 2>&1 ||
  die "nvidia-smi cannot reach the driver: $(head -n1 "$OUT/nvidia-smi.txt")" "check that the kernel module is loaded (lsmod | grep nvidia) and the device is visible"
if debian_torch; then
  torch_from=debian
  # libtorch_cuda.so needs libcudnn.so.9; Debian's nvidia-cudnn installs it only once NVIDIA's
  # licence is accepted (it downloads cuDNN then), and leaves a dangling link otherwise.
  [ -e /usr/lib/x86_64-linux-gnu/libcudnn.so.9 ] ||
    die "libcudnn.so.9 is missing (or a dangling link): Debian's LibTorch needs NVIDIA's cuDNN" \
        "sudo dpkg-reconfigure nvidia-cudnn (accept the licence: it downloads cuDNN 9 from NVIDIA)"
  command -v nvcc >/dev/null || die "nvcc not found" "sudo apt install nvidia-cuda-toolkit (Debian 13, non-free)"
  torch_version="$(sed -n 's/^#define TORCH_VERSION "\(.*\)"/\1/p' /usr/include/torch/csrc/api/include/torch/version.h 2>/dev/null | head -n1)"
  gpu_line="$(nvidia-smi --query-gpu=name,compute_cap,memory.total --format=csv,noheader,nounits | head -n1)"
  python3 - "$torch_version" "$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')" "$gpu_line" >"$OUT/torch.json" <<'EOF'
import json, sys
version, cuda, gpu = sys.argv[1], sys.argv[2], [f.strip() for f in sys.argv[3].split(",")]
print(json.dumps({"torch": version or "2.x (Debian)", "source": "debian", "cuda": cuda, "cuda_available": True,
                  "cxx11_abi": True, "cmake_prefix_path": "/usr", "gpu": gpu[0],
                  "capability": gpu[1] if len(gpu) > 1 else "",
                  "gpu_memory_gib": round(float(gpu[2]) / 1024, 1) if len(gpu) > 2 else 0}))
EOF
else
  torch_from=wheel
  command -v "$PY" >/dev/null || die "$PY not found" "install Python 3 and PyTorch, or set PYTHON=/path/to/python"
  "$PY" - >"$OUT/torch.json" <<'EOF' || die "$PY cannot import torch" "$PY -m pip install 'torch>=2.7' (a CUDA build, see pytorch.org); on Debian 13, GPU_CHECK_INSTALL=1 uses Debian's LibTorch instead"
import json, torch, torch.utils
ok = torch.cuda.is_available()
print(json.dumps({
    "torch": torch.__version__,
    "source": "wheel",
    "cuda": torch.version.cuda,
    "cuda_available": ok,
    "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
    "cmake_prefix_path": torch.utils.cmake_prefix_path,
    "gpu": torch.cuda.get_device_name(0) if ok else "",
    "capability": "%d.%d" % torch.cuda.get_device_capability(0) if ok else "",
    "gpu_memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1) if ok else 0,
}))
EOF
fi
tj() { python3 -c "import json,sys; print(json.load(open('$OUT/torch.json'))['$1'])"; }
torch_version="$(tj torch)"
if [ "$torch_from" = wheel ]; then
  [ "${torch_version%%.*}" -ge 2 ] 2>/dev/null ||
    die "torch $torch_version: PyTorch 2.x is needed" "$PY -m pip install -U 'torch>=2.7'"
  [ "$(tj cuda)" != None ] || die "torch $torch_version is a CPU-only build" "install a CUDA build of torch (pip's default on Linux x86_64 is one)"
  [ "$(tj cuda_available)" = True ] || die "torch $torch_version (CUDA $(tj cuda)) sees no GPU" "the driver is older than CUDA $(tj cuda) needs, or CUDA_VISIBLE_DEVICES hides the GPU"
  [ "$(tj cxx11_abi)" = True ] ||
    die "torch $torch_version's LibTorch uses the pre-C++11 ABI; Qt, yaml-cpp and CLI11 from the distribution use the C++11 ABI, so nothing would link" \
        "$PY -m pip install -U 'torch>=2.7' (Linux wheels use the C++11 ABI from 2.7), or unpack the cxx11-abi LibTorch zip and set TORCH_PREFIX=/path/to/libtorch"
fi
prefix="${TORCH_PREFIX:-$(tj cmake_prefix_path)}"
nvcc="${CUDACXX:-$(command -v nvcc || true)}"
[ -n "$nvcc" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || nvcc=/usr/local/cuda/bin/nvcc
[ -n "$nvcc" ] ||
  die "nvcc not found: PyTorch's CMake config (Caffe2/public/cuda.cmake) needs the CUDA toolkit" \
      "install the CUDA toolkit $(tj cuda) (nvcc), or set CUDACXX=/path/to/nvcc"
nvcc_dir="$(dirname "$nvcc")"
export CUDACXX="$nvcc" PATH="$nvcc_dir:$PATH"
for tool in cmake ninja g++; do
  command -v "$tool" >/dev/null || die "$tool not found" "GPU_CHECK_INSTALL=1 scripts/gpu_check.sh (Debian/Ubuntu), or install cmake >= 3.25, ninja-build and g++"
done
cap="$(tj capability)"
say "$(tj gpu) (sm ${cap}), driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n1), torch $torch_version ($torch_from), CUDA $(tj cuda), nvcc $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"

# ---- 2. configure and build what trains against PyTorch's LibTorch ----
configure() {  # configure EXTRA_ARGS...
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
    -DTORCH_CUDA_ARCH_LIST="$cap" -DCMAKE_CUDA_COMPILER="$nvcc" "$@" >"$OUT/configure.log" 2>&1
}
engine_only=0
if ! configure -DGRPO_ENGINE_ONLY=OFF; then
  if grep -q "Qt6" "$OUT/configure.log"; then
    say "Qt 6.4+ (Core, Network, Widgets, Charts, Test) not found: building the engine-only grpo (bench, inspect); tests and the demo run are skipped"
    rm -rf "$BUILD"
    engine_only=1
    configure -DGRPO_ENGINE_ONLY=ON || { tail -n 40 "$OUT/configure.log"; die "cmake configure failed (log: $OUT/configure.log)"; }
  else
    tail -n 40 "$OUT/configure.log"
    die "cmake configure failed (log: $OUT/configure.log)" "see the log; a missing CUDA library (e.g. nvToolsExt) means the toolkit and torch.version.cuda differ"
  fi
fi
tests=(test_device test_model test_model_decode test_model_lora test_trainer)
targets=(grpo)
if [ "$engine_only" = 0 ]; then targets+=("${tests[@]}"); fi
t0=$SECONDS
cmake --build "$BUILD" --target "${targets[@]}" >"$OUT/build.log" 2>&1 ||
  { grep -m20 -E "error|Error" "$OUT/build.log"; die "build failed (log: $OUT/build.log)"; }
build_s=$((SECONDS - t0))
say "built ${targets[*]} in ${build_s} s"

# ---- 3. tests: the model and trainer on CUDA; the CPU suites against LibTorch 2.x ----
failed=0
results="$OUT/tests.jsonl"
: >"$results"
if [ "$engine_only" = 0 ]; then
  for t in "${tests[@]}"; do
    exe="$(find "$BUILD/tests" -type f -name "$t" -perm -u+x | head -n1)"
    device=cpu
    if [ "$t" = test_device ]; then device=cuda; fi
    t1=$SECONDS
    if QT_QPA_PLATFORM=offscreen GRPO_TEST_DEVICE=$device "$exe" >"$OUT/$t.log" 2>&1; then ok=true; else ok=false; failed=1; fi
    echo "{\"test\":\"$t\",\"device\":\"$device\",\"passed\":$ok,\"seconds\":$((SECONDS - t1))}" >>"$results"
    say "$t on $device: $([ $ok = true ] && echo passed || echo "FAILED (log: $OUT/$t.log)")"
  done
fi

# ---- 4. benchmarks on the GPU (each prints its figures last as one JSON line) ----
grpo="$BUILD/app/grpo"
bench() {  # bench NAME ARGS...
  local name="$1"; shift
  if "$grpo" bench "$@" >"$OUT/bench-$name.log" 2>&1; then
    tail -n1 "$OUT/bench-$name.log" >"$OUT/bench-$name.json"
    say "bench $name: $(cut -c1-200 "$OUT/bench-$name.json")"
  else
    failed=1
    say "bench $name FAILED (log: $OUT/bench-$name.log)"
  fi
}
bench forward-cuda forward --device cuda --size "$SIZE" --seq-len 1024 --batch 8 --iters 5
bench forward-cpu forward --device cpu --size "$SIZE" --seq-len 512 --batch 1 --iters 2
bench generate-cuda generate --device cuda --size "$SIZE" --prompts 32 --group 8 --max-tokens 128
if py_torch; then
  bench grpo-step-cuda grpo-step --device cuda --size "$SIZE" --python "$PY" --script tests/bench/grpo_step_baseline.py
else
  say "bench grpo-step skipped: $PY has no torch for PyTorch's side of it (Debian 13: sudo apt install python3-torch-cuda)"
fi

# ---- 5. a short demo run on the GPU ----
if [ "$engine_only" = 0 ]; then
  rm -rf "$OUT/demo-run"
  t1=$SECONDS
  if "$grpo" train --demo --steps "$STEPS" --output "$OUT/demo-run" >"$OUT/demo.log" 2>&1; then
    say "grpo train --demo --steps $STEPS: $((SECONDS - t1)) s; last metrics: $(tail -n1 "$OUT/demo-run/metrics.jsonl" | cut -c1-200)"
  else
    failed=1
    say "grpo train --demo FAILED (log: $OUT/demo.log)"
  fi
fi

# ---- 6. one JSON file with every figure ----
python3 - "$OUT" "$build_s" "$engine_only" "$STEPS" <<'EOF'
import glob, json, os, platform, subprocess, sys, datetime
out, build_s, engine_only, steps = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4])
def lines(path):
    try:
        return [json.loads(l) for l in open(path) if l.strip()]
    except (OSError, ValueError):
        return []
smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip()
report = {
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "host": platform.node(), "cpu_count": os.cpu_count(), "nvidia_smi": smi,
    "torch": json.load(open(os.path.join(out, "torch.json"))),
    "build_seconds": build_s, "engine_only": engine_only,
    "tests": lines(os.path.join(out, "tests.jsonl")),
    "bench": {os.path.basename(p)[6:-5]: (lines(p) or [None])[-1] for p in sorted(glob.glob(os.path.join(out, "bench-*.json")))},
}
metrics = lines(os.path.join(out, "demo-run", "metrics.jsonl"))
if metrics:
    report["demo"] = {"steps": steps, "last": metrics[-1],
                      "eval_accuracy": [m["eval/accuracy"] for m in metrics if "eval/accuracy" in m]}
json.dump(report, open(os.path.join(out, "gpu_check.json"), "w"), indent=1)
print("gpu_check: wrote", os.path.join(out, "gpu_check.json"))
EOF
[ "$failed" = 0 ] || die "some checks failed (see above)"
say "all checks passed"
