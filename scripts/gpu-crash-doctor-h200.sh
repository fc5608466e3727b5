#!/usr/bin/env bash
# `gpu-crash doctor` on a real GPU (issue 24), compared with the plugin's own capability line on the
# same machine. Results go into docs/gpu-crash-cli.md.
#
#   scripts/gpu-crash-doctor-h200.sh build    # here (x86-64, Rust): release gpu-crash + crash_drill into .devrun/doctor/
#   scripts/gpu-crash-doctor-h200.sh device   # there (the device machine: no Rust, no network)
#
# What to pass to the `device` tool's `run` (carry .gl for the Vulkan loader debs, .devrun for the
# binaries; .gl as in /work/.library/device/README.md):
#   run(command="bash scripts/gpu-crash-doctor-h200.sh device", carry=[".gl", ".devrun"], timeout_s=300)
# It writes $OUT/doctor-results.tar.gz: doctor.txt/.json without the drill layer, doctor-drill.txt
# /.json under `gpu-crash drill -- gpu-crash doctor`, and the plugin's capability line from the
# crash_drill example (plugin-line.txt) with and without the layer.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

build() {
    local target=${CARGO_TARGET_DIR:-$ROOT/target}
    cargo build --release -p gpu-crash --bin gpu-crash
    cargo build --release --example crash_drill
    rm -rf .devrun/doctor && mkdir -p .devrun/doctor
    cp "$target/release/gpu-crash" "$target/release/examples/crash_drill" .devrun/doctor/
    strip .devrun/doctor/gpu-crash .devrun/doctor/crash_drill
    xz -T0 -6 .devrun/doctor/gpu-crash .devrun/doctor/crash_drill
    ls -la .devrun/doctor
}

device() {
    set +e  # every step records its exit code and the batch goes on
    : "${OUT:?OUT must be set (the device tool sets it)}"
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    export VK_DRIVER_FILES=${GCD_VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
    export XDG_RUNTIME_DIR=/tmp XDG_CACHE_HOME=/tmp/gcd-cache XDG_DATA_HOME=/tmp/gcd-data NO_COLOR=1 RUST_LOG=info
    local bin=/tmp/gcd-bin logs=/tmp/gcd-logs
    mkdir -p $bin $logs
    cp .devrun/doctor/*.xz $bin/ && xz -d $bin/*.xz && chmod +x $bin/*
    { date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $logs/env.txt 2>&1
    cat $logs/env.txt

    echo "== doctor, no layer"
    $bin/gpu-crash doctor > $logs/doctor.txt 2>&1; echo "rc=$?" >> $logs/doctor.txt
    $bin/gpu-crash doctor --json > $logs/doctor.json 2> $logs/doctor-json.err; echo "rc=$?" >> $logs/doctor-json.err
    cat $logs/doctor.txt
    echo "== doctor under the drill layer"
    $bin/gpu-crash drill -- $bin/gpu-crash doctor > $logs/doctor-drill.txt 2>&1; echo "rc=$?" >> $logs/doctor-drill.txt
    $bin/gpu-crash drill -- $bin/gpu-crash doctor --json > $logs/doctor-drill.json 2> $logs/doctor-drill-json.err
    cat $logs/doctor-drill.txt

    echo "== the plugin's own line on the same machine (crash_drill, 30 frames, no fault)"
    CRASH_DRILL_FRAMES=30 timeout -s KILL 60 $bin/crash_drill > $logs/plugin.out 2> $logs/plugin.err
    echo "no layer rc=$?" >> $logs/plugin-line.txt
    grep -o "GPU crash reporter: [^$]*" $logs/plugin.err | grep "binding report" | head -1 >> $logs/plugin-line.txt
    CRASH_DRILL_FRAMES=30 timeout -s KILL 60 $bin/gpu-crash drill --scenario use-after-free --after 100000 -- $bin/crash_drill \
        > $logs/plugin-drill.out 2> $logs/plugin-drill.err
    echo "drill layer rc=$?" >> $logs/plugin-line.txt
    grep -o "GPU crash reporter: [^$]*" $logs/plugin-drill.err | grep "binding report" | head -1 >> $logs/plugin-line.txt
    cat $logs/plugin-line.txt
    tar -C $logs -czf "$OUT/doctor-results.tar.gz" .
}

case "${1:-}" in
    build) build ;;
    device) device ;;
    *) echo "usage: $0 build | device"; exit 2 ;;
esac
