#!/usr/bin/env bash
# Issue 47's long session on the NVIDIA host: the realistic scene with 1,000 labelled buffers made and
# destroyed a frame (`realistic_scene --buffer-churn 1000`) for 11 minutes in four configurations at
# once, one line a minute each (`--minutes 11`; bench/realistic_scene/README.md). Results in
# BENCHMARKS.md ("issue 47's long session") and docs/gpu-validation/long-session-2026-12-07/.
#
#   scripts/long-session.sh build     # here (x86-64, Rust): build, strip, xz into .devrun/ls47.tar.xz
#   scripts/long-session.sh launch    # there: start the four runs (setsid), wait ~9.5 min, copy the logs
#   scripts/long-session.sh finish    # there, right after `launch` returns: wait for the runs, copy the
#                                     # logs, then (LS_CONTROL, default 1) one short sequential round
#
# What was passed to the `device` tool's `run` (carry .gl for the Vulkan loader debs, .devrun for the
# binary; /work/.library/device/README.md; the machine goes back 30 s after a call, so `finish` must
# follow `launch` at once):
#   run(command="bash scripts/long-session.sh launch", carry=[".gl", ".devrun"], timeout_s=600)
#   run(command="bash scripts/long-session.sh finish", carry=[".gl", ".devrun"], timeout_s=600)
# and, on 2026-12-07, a third call on the same warm machine: configuration 1 alone for 8 minutes,
#   run(command="export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json \
#     XDG_RUNTIME_DIR=/tmp RUST_LOG=warn NO_COLOR=1; timeout -s KILL 545 /tmp/ls-bin/realistic_scene \
#     --minutes 8 --buffer-churn 1000 --warmup 60 > $OUT/alone8-c1.out 2> $OUT/alone8-c1.err", timeout_s=560)
#
# `build` builds a `git archive HEAD` copy (LS_SRC, default /tmp/ls-src, made if missing) so that
# edits in progress in this checkout do not leak into the measured binary; copy an edited
# bench/realistic_scene/src/main.rs there first when it is not committed yet.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MINUTES=${LS_MINUTES:-11}
CHURN=${LS_BUFFER_CHURN:-1000}
WARMUP=${LS_WARMUP:-60}
# id:flag. 0 no plugin, 1 plugin all on, 4 binding report on / our callback returns at once
# (GPU_CRASH_REPORTER_COST_FLOOR), 2 plugin with capture_address_bindings: false.
CONFIGS="0:--no-plugin 1: 4:--floor 2:--no-bindings"
logs=/tmp/ls-logs
bin=/tmp/ls-bin

build() {
    local src=${LS_SRC:-/tmp/ls-src}
    if [ ! -d "$src" ]; then
        mkdir -p "$src" && git archive HEAD | tar -C "$src" -xf - || return 1
    fi
    (cd "$src/bench/realistic_scene" && nice -n 10 cargo build --release --offline) || return 1
    local target=$src/target stage=/tmp/ls-stage
    rm -rf $stage && mkdir -p $stage .devrun
    cp "$target/release/realistic_scene" $stage/
    strip $stage/realistic_scene
    tar -C $stage -cf - realistic_scene | xz -T0 -6 > .devrun/ls47.tar.xz
    (git -C "$src" describe --always --dirty --abbrev=12 2>/dev/null || git rev-parse --short=12 HEAD) \
        > .devrun/ls47.commit
    ls -la .devrun/ls47.*
}

setup() {
    : "${OUT:?OUT must be set (the device tool sets it)}"
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    export XDG_RUNTIME_DIR=/tmp RUST_LOG=warn NO_COLOR=1
    mkdir -p $bin $logs
}

# Every log and the GPU's memory samples into $OUT (two files: at most 8 come back).
collect() {
    tar -C $logs -czf "$OUT/long-session-logs.tar.gz" .
    for c in $CONFIGS; do
        grep -h '^realistic_scene_minute ' $logs/c${c%%:*}.out 2>/dev/null
    done > "$OUT/minutes.txt"
    cat "$OUT/minutes.txt" | cut -c1-260
}

launch() {
    setup
    local t0=$SECONDS
    tar -C $bin -xJf .devrun/ls47.tar.xz
    {
        date -u
        echo "commit $(cat .devrun/ls47.commit); $(nproc) cores"
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    } > $logs/env.txt 2>&1
    cat $logs/env.txt
    # The GPU's memory and load once a minute, for as long as the runs go.
    setsid bash -c "for i in \$(seq 1 16); do nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu \
        --format=csv,noheader >> $logs/gpu.txt 2>&1; sleep 60; done" < /dev/null > /dev/null 2>&1 &
    local c id flag
    for c in $CONFIGS; do
        id=${c%%:*} flag=${c#*:}
        echo "$bin/realistic_scene --minutes $MINUTES --buffer-churn $CHURN --warmup $WARMUP $flag" \
            > $logs/c$id.cmd
        setsid bash -c "date -u +%FT%TZ > $logs/c$id.start; timeout -s KILL $((MINUTES * 60 + 240)) \
            $bin/realistic_scene --minutes $MINUTES --buffer-churn $CHURN --warmup $WARMUP $flag \
            > $logs/c$id.out 2> $logs/c$id.err; echo \"rc=\$?\" > $logs/c$id.rc; date -u +%FT%TZ >> $logs/c$id.rc" \
            < /dev/null > /dev/null 2>&1 &
    done
    while [ $((SECONDS - t0)) -lt ${LS_LAUNCH_WAIT:-560} ]; do
        sleep 20
        echo "$((SECONDS - t0)) s: $(for c in $CONFIGS; do echo -n "c${c%%:*}=$(grep -c '^realistic_scene_minute ' $logs/c${c%%:*}.out 2>/dev/null) "; done)"
    done
    collect
}

# One configuration alone, $2 minutes (the short sequential control).
alone() {
    local id=$1 flag=$2
    timeout -s KILL 200 $bin/realistic_scene --minutes ${LS_CONTROL_MINUTES:-1} --buffer-churn $CHURN \
        --warmup $WARMUP $flag > $logs/alone-c$id.out 2> $logs/alone-c$id.err
    echo "alone c$id rc=$? $(grep '^realistic_scene_minute ' $logs/alone-c$id.out | cut -c1-200)"
}

finish() {
    : "${OUT:?OUT must be set (the device tool sets it)}"
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    export XDG_RUNTIME_DIR=/tmp RUST_LOG=warn NO_COLOR=1
    local t0=$SECONDS c
    while [ $((SECONDS - t0)) -lt 330 ]; do
        local left=0
        for c in $CONFIGS; do [ -f $logs/c${c%%:*}.rc ] || left=$((left + 1)); done
        [ $left = 0 ] && break
        sleep 5
    done
    cat $logs/c*.rc
    nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader >> $logs/gpu.txt 2>&1
    collect
    if [ "${LS_CONTROL:-1}" = 1 ]; then
        # Each configuration alone, in the order 0 1 4 2: its own minute without the others.
        for c in $CONFIGS; do
            # Within the call's 600 s: a run takes about 100 s (start, warm-up, one minute).
            [ $((SECONDS - t0)) -lt 470 ] || { echo "no time left for alone c${c%%:*}"; continue; }
            alone ${c%%:*} "${c#*:}"
        done
        tar -C $logs -czf "$OUT/long-session-logs.tar.gz" .
        grep -h '^realistic_scene_minute ' $logs/alone-c*.out > "$OUT/alone.txt"
    fi
}

case "${1:-}" in
    build) build ;;
    launch) launch ;;
    finish) finish ;;
    *) echo "usage: $0 build | launch | finish"; exit 2 ;;
esac
