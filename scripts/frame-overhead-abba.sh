#!/usr/bin/env bash
# Frame time of several builds of examples/frame_overhead, alternating single processes: each round
# runs every binary once, the order reversed every other round; prints each run's median and mean
# frame (the plugin with everything on, 1,000 buffers a frame). Used for BENCHMARKS.md (issue 36).
#
#   scripts/frame-overhead-abba.sh ROUNDS LAYER_DIR NAME=BINARY [NAME=BINARY ...]
#
# LAYER_DIR holds the release drill layer's manifest (`cargo xtask layer-manifest --release DIR`),
# which gives lavapipe the binding report.
set -euo pipefail
rounds=$1 layer=$2; shift 2
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/share/vulkan/icd.d/lvp_icd.x86_64.json}
export VK_LAYER_PATH=$layer VK_INSTANCE_LAYERS=VK_LAYER_gpu_crash_drill XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
export GPU_CRASH_REPORT_DIR=${GPU_CRASH_REPORT_DIR:-/tmp/frame-overhead-abba-reports}
forward=("$@") backward=()
for ((i = ${#forward[@]} - 1; i >= 0; i--)); do backward+=("${forward[i]}"); done
for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) -eq 1 ]; then order=("${forward[@]}"); else order=("${backward[@]}"); fi
    for pair in "${order[@]}"; do
        name=${pair%%=*} exe=${pair#*=}
        line=$(timeout 120 "$exe" --frames 600 --warmup 60 2>/dev/null | grep -E "^frame_overhead plugin" | head -1 || true)
        echo "round $r $name $(grep -oE 'mean_us=[0-9.]+|median_us=[0-9.]+|events=[0-9]+|dropped=[0-9]+' <<< "$line" | tr '\n' ' ')"
    done
done
