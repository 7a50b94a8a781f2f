#!/usr/bin/env bash
# GPU check of dpkit.torch, for a machine with an NVIDIA GPU and a python3 that has torch (CUDA),
# numpy, scipy, pytest and pytest-xdist, but no internet: randomgen and opacus come from wheels
# in .whl/ at the repository root. Runs (b2) the GPU benchmark (plain step, dpkit, Opacus;
# with a profile of one dpkit step), (a) the DP-SGD tests, CUDA-only ones included, and (b1) a
# noise-throughput probe. Logs go to $OUT
# (default ./gpu_out). About 3–4 minutes in all; each part has its own time limit.
#
#   bash benchmarks/gpu_check.sh
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1

echo "== machine"; date -u; git log --oneline -1 2>/dev/null || true
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | head -3
nproc

echo "== install (offline wheels)"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:src
python3 -c "import torch, numpy, scipy, randomgen, opacus; print('torch', torch.__version__, \
'cuda', torch.cuda.is_available(), 'numpy', numpy.__version__, 'scipy', scipy.__version__, \
'randomgen', randomgen.__version__, 'opacus', opacus.__version__)"

echo "== (b2) benchmark: python3 benchmarks/dpsgd_torch.py --device cuda"
timeout 120 python3 -W ignore::UserWarning benchmarks/dpsgd_torch.py --device cuda --repeats 30 \
    --threads 8 --profile 2>&1 | tee "$OUT/bench.log"
echo "bench rc=${PIPESTATUS[0]}"
echo "== (a) tests/dpsgd (CUDA tests included)"
start=$(date +%s)
timeout 110 python3 -m pytest -W error -p no:cacheprovider -p no:benchmark -q -n 4 -rs --durations=12 \
    tests/dpsgd > "$OUT/tests.log" 2>&1
echo "pytest rc=$? in $(( $(date +%s) - start )) s"
tail -40 "$OUT/tests.log"

echo "== (b1) noise throughput on the GPU (exact discrete Gaussian, ChaCha20)"
timeout 45 python3 - <<'EOF' 2>&1 | tee "$OUT/noise.log"
import time, torch
from dpkit.random import seeded
from dpkit.torch._chacha import ChaChaStream
from dpkit.torch._device_noise import DeviceGaussian
dev = "cuda"
t = time.perf_counter()
s = ChaChaStream(bytes(32), dev)
s.words(16); torch.cuda.synchronize()
print(f"chacha20 first call (compiles when it can) {time.perf_counter() - t:.1f} s, compiled: {s.compiled}")
from dpkit.torch import _chacha
e = ChaChaStream(bytes(32), dev)
e._rounds = _chacha._double_round  # the eager block function, for comparison
for label, st in (("default", s), ("eager", e)):
    for n in (1 << 23, 1 << 25):
        st.words(n); torch.cuda.synchronize(); t = time.perf_counter()
        st.words(n); torch.cuda.synchronize(); dt = time.perf_counter() - t
        print(f"chacha20 {label} {n} words: {dt * 1e3:.2f} ms, {n / dt / 1e6:.0f} M words/s")
g = DeviceGaussian(1.0, -24, gen=seeded(0), device=dev)
print("sampler stream compiled:", g._sampler.stream.compiled)
for n in (60_000, 1 << 20, 1 << 22):
    g.sample(n); torch.cuda.synchronize(); t = time.perf_counter()
    g.sample(n); torch.cuda.synchronize(); dt = time.perf_counter() - t
    print(f"discrete gaussian {n} samples: {dt * 1e3:.2f} ms, {n / dt / 1e6:.1f} M samples/s")
x = torch.empty(1 << 22, device=dev)
torch.randn(1 << 22, device=dev, out=x); torch.cuda.synchronize(); t = time.perf_counter()
torch.randn(1 << 22, device=dev, out=x); torch.cuda.synchronize()
print(f"torch.randn (not secure, not exact) {1 << 22}: {(time.perf_counter() - t) * 1e3:.2f} ms")
EOF

date -u
