#!/usr/bin/env bash
# The real-fault matrix on the NVIDIA host (issue 47; results in docs/driver-facts.md and
# docs/gpu-validation/fault-matrix-2026-12-07/).
#
#   tools/nv_fault_matrix/run-matrix.sh build                # here: build, strip, stage into .nvfm/
#   tools/nv_fault_matrix/run-matrix.sh device PLAN...       # there (no Rust, no network)
#
# PLAN entries are CASE:CONFIG (see src/main.rs), run one process at a time, in the order given,
# each under `timeout -s KILL` (wait cap + 30 s). `canary+CASE:CONFIG` runs a canary process beside
# that case. Before each process the script checks that it can end (wait cap + 12 s) before
# MATRIX_DEADLINE_S - MATRIX_RESERVE_S (seconds since the script began); `last+CASE:CONFIG` may use
# the reserve (the endless shader, which must run last). An entry that cannot is written as skipped. After each
# process: new kernel-log Xid lines, nvidia-smi utilisation, and everything packed into
# $OUT/matrix.tar.gz (so a call cut short still returns what ran).
#
# What was passed to the device tool's `run` (`.gl` holds the Vulkan loader debs, see
# /work/.library/device/README.md; `.nvfm` the stripped binary):
#   run(command="bash tools/nv_fault_matrix/run-matrix.sh device <plan>", carry=[".gl", ".nvfm"], timeout_s=600)
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

build() {
    set -e
    (cd tools/nv_fault_matrix && ./shaders/build.sh && git diff --exit-code -- shaders/*.spv >/dev/null \
        || echo "note: the compiled .spv differ from the committed ones")
    (cd tools/nv_fault_matrix && CARGO_TARGET_DIR=$ROOT/tools/nv_fault_matrix/target cargo build --release --offline)
    rm -rf .nvfm && mkdir -p .nvfm
    cp tools/nv_fault_matrix/target/release/nv_fault_matrix .nvfm/
    strip .nvfm/nv_fault_matrix
    ls -la .nvfm
}

device() {
    : "${OUT:?OUT must be set (the device tool sets it)}"
    local t_start; t_start=$(date +%s)
    local deadline=${MATRIX_DEADLINE_S:-560} cap=${MATRIX_WAIT_CAP_S:-45} reserve=${MATRIX_RESERVE_S:-0}
    # per: the kill timeout of one process; est: what a process that waits out the cap takes.
    local per=$((cap + 30)) est=$((cap + 12))
    # MATRIX_SKIP_DEBS / MATRIX_VK_DRIVER_FILES: only to rehearse this function here on lavapipe.
    if [ -z "${MATRIX_SKIP_DEBS:-}" ]; then
        for f in .gl/*.deb; do dpkg -x "$f" /; done
        ldconfig
    fi
    export VK_DRIVER_FILES=${MATRIX_VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
    local R=/tmp/nvfm-results bin=$ROOT/.nvfm/nv_fault_matrix
    mkdir -p $R
    {
        echo "date_utc=$(date -u +%FT%TZ)"
        echo "command=$0 device $*"
        nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv
        uname -r
    } > $R/env.txt 2>&1
    cat $R/env.txt
    xid_count() { dmesg 2>/dev/null | grep -ci xid || true; }
    dmesg >/dev/null 2>&1 && echo "dmesg readable" >> $R/env.txt || echo "dmesg NOT readable" >> $R/env.txt
    pack() { tar -C /tmp -czf "$OUT/matrix.tar.gz" nvfm-results; }
    for entry in "$@"; do
        local canary="" end=$((deadline - reserve))
        case $entry in canary+*) canary=1; entry=${entry#canary+} ;; esac
        # last+: the entry that may use the reserved tail (the endless shader, which must run last).
        case $entry in last+*) end=$deadline; entry=${entry#last+} ;; esac
        local c=${entry%%:*} k=${entry#*:} name=${entry/:/-}
        local now=$(( $(date +%s) - t_start ))
        if [ $((now + est)) -gt "$end" ]; then
            echo "$name skipped: deadline (t=${now}s, may need ${est}s, must end by ${end}s)" | tee -a $R/summary.txt
            continue
        fi
        local x0; x0=$(xid_count)
        local cpid=""
        if [ -n "$canary" ]; then
            timeout -s KILL $per $bin --case canary --config off --canary-s $((cap + 10)) \
                > $R/canary-beside-$name.json 2> $R/canary-beside-$name.err &
            cpid=$!
            sleep 3
        fi
        local t0; t0=$(date +%s%N)
        timeout -s KILL $per $bin --case "$c" --config "$k" --wait-cap-s "$cap" > $R/$name.json 2> $R/$name.err
        local rc=$?
        local el=$(( ($(date +%s%N) - t0) / 1000000 ))
        [ -n "$cpid" ] && wait $cpid
        local x1; x1=$(xid_count)
        dmesg 2>/dev/null | grep -i xid | tail -n $(( x1 > x0 ? (x1 - x0 > 20 ? 20 : x1 - x0) : 0 )) > $R/$name.xid 2>/dev/null
        timeout -s KILL 10 nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader >> $R/$name.xid 2>&1
        local last; last=$(tail -n 1 $R/$name.json | grep -o '"outcome":{[^}]*}' | head -c 400)
        echo "$name rc=$rc wall_ms=${el} new_xid=$((x1 - x0)) $last" | tee -a $R/summary.txt
        pack
    done
    pack
    ls -la "$OUT"
}

case ${1:-} in
    build) build ;;
    device) shift; device "$@" ;;
    *) echo "usage: $0 build | device CASE:CONFIG..." >&2; exit 2 ;;
esac
