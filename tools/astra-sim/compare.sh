#!/usr/bin/env bash
# Replays simtrain's Chakra traces of the default scenario (Llama-2 13B, 2x DGX A100, TP 8 x PP 2) in ASTRA-sim's
# analytical backend and prints each side's step: ASTRA-sim's latest rank finish against simtrain's step time.
#   tools/astra-sim/compare.sh ASTRA_BIN_DIR [SIMTRAIN]   (ASTRA_BIN_DIR: what build.sh prints)
# The network files describe the same cluster: 8 GPUs on a switch at 300 GB/s each way and two nodes over one
# 200 Gb/s NIC per GPU, at nominal bandwidth or with simtrain's efficiencies (NCCL's 0.767 of NVLink, 0.94 of the
# NIC); the system file runs every collective as a ring in each dimension.
set -euo pipefail
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
simtrain=${2:-$here/../../build/simtrain}
scenario=$here/../../scenarios/default.json
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$simtrain" tasks "$scenario" --format chakra --out "$out/et" >/dev/null
step=$("$simtrain" run "$scenario" --format json --quiet | python3 -c "import json,sys; print(json.load(sys.stdin)['step_time_s'])")
echo "simtrain: step ${step} s"
for net in network_dgx_a100_2node network_dgx_a100_2node_eff; do
  (cd "$out" && "$bin/AstraSim_Analytical_Congestion_Unaware" --workload-configuration="$out/et/default" \
    --comm-group-configuration="$out/et/comm_group.json" --system-configuration="$here/system_ring.json" \
    --network-configuration="$here/$net.yml" --remote-memory-configuration="$here/remote_memory.json" >"$out/$net.txt")
  finish=$(grep -o 'finished, [0-9]* cycles' "$out/$net.txt" | awk '{ if ($2 > m) m = $2 } END { print m / 1e9 }')
  echo "ASTRA-sim ($net): latest rank finishes at ${finish} s, $(python3 -c "print(f'{$finish / $step:.3f}')")x simtrain's step"
done
