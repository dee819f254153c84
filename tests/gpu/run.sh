#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the GPU end-to-end of rdma-validate on a machine with two or more GPUs, as root, needing no
# other tool (no `ip`): BUILD is a build tree made on a compatible machine (default build/ci).
#   tests/gpu/run.sh [BUILD] [OUT]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/ci}
OUT=${2:-/tmp/kuberdma-gpu-e2e}
if ! command -v nvidia-smi >/dev/null || [ "$(nvidia-smi -L | wc -l)" -lt 2 ]; then
  echo "SKIP: the GPU end-to-end needs two GPUs"; exit 77
fi
exec "$BUILD/tests/gpu_e2e" --rdma "$BUILD/cni/rdma" --validate "$BUILD/tools/validator/rdma-validate" \
  --bare "$BUILD/bench/nccl_bare" --out "$OUT"
