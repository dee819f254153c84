#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What only a GPU machine (its kernel has ib_core) can show, as root, needing no other tool (no
# `ip`). BUNDLE is tests/gpu/bundle.sh's folder, built on a compatible machine and carried; OUT
# keeps every report and log. With one GPU, ranks share it: each keeps its own NCCL_HOSTID, so
# their traffic still crosses the simulated network.
#   tests/gpu/run.sh [BUNDLE] [OUT] [STEP...]
# Steps (default: all): live (RDMA netlink against the kernel), e2e (rdma-validate pass/fail
# scenarios and busbw against a bare NCCL loop), demo (node-in-a-box with NCCL), fleet (4 nodes x
# 2 rails, node 3's rail 2 at 1 Gbit/s, must be named, and node 2's rail 1 on rail 2's leaf by
# LLDP, named as miscabled), fleet-healthy (the same, nothing
# degraded: must pass), fleet-odd (5 nodes x 2 rails, node 1's rail 2 at 1 Gbit/s: rank 0's node,
# in an odd fleet), fleet-half (6 x 3, node 4's rail 3 at 0.7 Gbit/s, about half of what a healthy
# rail carries here), and on request fleet-loss (node 2's rail 1 dropping 5%: netem) and
# fleet-8x4 (8 nodes x 4 rails, node 6's rail 3 at 0.2 Gbit/s: on one GPU the 32 ranks of a
# round share it and 16 cores, and every healthy rail runs near 1 Gbit/s, so the default 1 Gbit/s
# limit would be no degradation at all), and usage-healthy, usage-tbf, usage-leftout (NCCL for
# $SOAK s, each rail's bytes sampled for tests/gpu/usage_alerts.py).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUNDLE=$(realpath "${1:-build/gpu-bundle}")
OUT=${2:-/tmp/kuberdma-gpu}
shift $(( $# > 2 ? 2 : $# ))
STEPS=${*:-live e2e demo fleet fleet-healthy fleet-odd fleet-half}
# The e2e's alternating rounds per collective: 2 keeps the whole default tier inside one
# 8-minute device call (docs/development.md#gpu-machine has the measured times); more rounds
# judge ratios more finely (`E2E_REPEATS=5 tests/gpu/run.sh BUNDLE OUT e2e`).
E2E_REPEATS=${E2E_REPEATS:-2}
SOAK=${SOAK:-120}  # the usage steps' NCCL time, seconds
B=$BUNDLE/bin
export LD_LIBRARY_PATH=$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
GPUS=$(ls /dev | grep -cE '^nvidia[0-9]+$' || true)
if [ "$GPUS" -lt 1 ]; then
  echo "SKIP: no GPU here (no /dev/nvidia<N>)"; exit 77
fi
mkdir -p "$OUT"
DEMO=(--rdma "$B/kube-rdma" --device-plugin "$B/rdma-device-plugin" --validate "$B/rdma-validate"
      --doctor "$B/rdma-doctor" --fixture "$PWD/tests/fixtures/sysfs/roce8" --cni-plugins "$BUNDLE/cni"
      --manifests "$BUNDLE/rendered/demo-values.yaml")
failed=()
step() {  # step NAME COMMAND...: runs it, its output to OUT/NAME.txt and here, its time and exit
  local name=$1; shift
  echo "=== $name: $*"
  local t0=$SECONDS
  "$@" > "$OUT/$name.txt" 2>&1
  local rc=$?
  cat "$OUT/$name.txt"
  echo "=== $name: exit $rc in $((SECONDS - t0)) s"
  [ $rc -eq 0 ] || failed+=("$name")
}
for s in $STEPS; do
  case $s in
    live) step live "$B/rdma_live_tests" --doctor "$B/rdma-doctor" -s ;;
    e2e) step e2e "$B/gpu_e2e" --rdma "$B/kube-rdma" --validate "$B/rdma-validate" --bare "$B/nccl_bare" \
                  --out "$OUT/e2e" --gpus $(( GPUS > 2 ? 2 : GPUS )) --repeats "$E2E_REPEATS" ;;
    demo) step demo "$B/kuberdma-demo" "${DEMO[@]}" --nccl on ;;
    fleet) step fleet "$B/kuberdma-demo" "${DEMO[@]}" --fleet 4 --rails 2 --degrade 3:2 --miscable 2:1 --keep ;;
    fleet-healthy) step fleet-healthy "$B/kuberdma-demo" "${DEMO[@]}" --fleet 4 --rails 2 --degrade none ;;
    fleet-odd) step fleet-odd "$B/kuberdma-demo" "${DEMO[@]}" --fleet 5 --rails 2 --degrade 1:2 ;;
    fleet-half) step fleet-half "$B/kuberdma-demo" "${DEMO[@]}" --fleet 6 --rails 3 --degrade 4:3 \
                     --degrade-gbps 0.7 --keep
                # rank 0's fleet report and its page (tests/fixtures/acceptance takes them)
                kept=$(sed -n 's/.*reports and NCCL logs kept in //p' "$OUT/fleet-half.txt" | tail -1)
                [ -n "$kept" ] && cp "$kept/node-1.json" "$kept/node-1.html" "$OUT/" 2>/dev/null ;;
    fleet-loss) step fleet-loss "$B/kuberdma-demo" "${DEMO[@]}" --fleet 4 --rails 2 --degrade 2:1 \
                     --degrade-kind loss --degrade-loss 5 ;;
    # The usage alerts' live evidence (tests/gpu/usage_alerts.py replays the samples through
    # promtool here): 2 nodes x 2 rails, NCCL for SOAK seconds, every rail's bytes every 5 s;
    # healthy, node 2's rail 2 at 0.2 Gbit/s (tbf), and NCCL told to use rail 1 only.
    usage-healthy) step usage-healthy "$B/kuberdma-demo" "${DEMO[@]}" --fleet 2 --rails 2 \
                        --degrade none --soak "$SOAK" --usage-out "$OUT/usage-healthy.json" ;;
    usage-tbf) step usage-tbf "$B/kuberdma-demo" "${DEMO[@]}" --fleet 2 --rails 2 --degrade 2:2 \
                    --degrade-gbps 0.2 --soak "$SOAK" --usage-out "$OUT/usage-tbf.json" ;;
    usage-leftout) step usage-leftout "$B/kuberdma-demo" "${DEMO[@]}" --fleet 2 --rails 2 \
                        --degrade none --soak-devices net1 --soak "$SOAK" \
                        --usage-out "$OUT/usage-leftout.json" ;;
    fleet-8x4) step fleet-8x4 "$B/kuberdma-demo" "${DEMO[@]}" --fleet 8 --rails 4 --degrade 6:3 \
                    --degrade-gbps 0.2 ;;
    *) echo "unknown step $s"; exit 2 ;;
  esac
done
echo "GPU machine steps: $STEPS; failed: ${failed[*]:-none}"
[ ${#failed[@]} -eq 0 ]
