#!/usr/bin/env bash
# GPU validation on a real driver (issue 6; results in docs/gpu-validation.md).
#
#   scripts/gpu-validation.sh build    # here (x86-64, Rust): build, strip, stage into .devrun/
#   scripts/gpu-validation.sh device   # there (the device machine: no Rust, no network), batch 1
#   scripts/gpu-validation.sh device2  # there, batch 2 (follow-ups to batch 1)
#   scripts/gpu-validation.sh device3  # there, batch 3 (capture + drills again, later commit)
#
# What was passed to the `device` tool's `run` (carry .gl for the Vulkan loader debs, .devrun for the
# binaries; see /work/.library/device/README.md):
#   run(command="bash scripts/gpu-validation.sh device", carry=[".gl", ".devrun"], timeout_s=300)
#   run(command="bash scripts/gpu-validation.sh device2", carry=[".gl", ".devrun"], timeout_s=280)
#   run(command="bash scripts/gpu-validation.sh device3", carry=[".gl", ".devrun"], timeout_s=200)
#
# `build` assumes `.gl/` already holds libvulkan1, libglvnd0, libglx0 (+ libegl1 libgl1 libopengl0
# libgles2) .debs (device README) and that `/.devrun/` and `/.gl/` are ignored (.git/info/exclude).
# Set GV_SRC to build another checkout (e.g. a `git archive HEAD` copy, so that edits in progress in
# the working tree do not leak into the measured binaries) and CARGO_TARGET_DIR as usual.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

build() {
    local src=${GV_SRC:-$ROOT}
    local target=${CARGO_TARGET_DIR:-$src/target}
    command -v spirv-as >/dev/null || { echo "need spirv-as (apt-get install spirv-tools)"; exit 1; }
    # The real-fault shader: re-assemble and check it matches the committed .spv.
    spirv-as --target-env vulkan1.0 examples/gpu_validation_shaders/write_storage.spvasm -o /tmp/write_storage.spv
    spirv-val --target-env vulkan1.0 /tmp/write_storage.spv
    cmp /tmp/write_storage.spv examples/gpu_validation_shaders/write_storage.spv
    (cd "$src" && CARGO_TARGET_DIR=$target cargo build --release --example gpu_validation --example crash_drill \
        && CARGO_TARGET_DIR=$target cargo build --release -p gpu_crash_drill_layer)
    rm -rf .devrun && mkdir -p .devrun/layer /tmp/gv-stage
    cp "$target/release/libgpu_crash_drill_layer.so" .devrun/layer/
    # `cargo xtask layer-manifest` writes an absolute library path; the device machine needs one
    # relative to the manifest.
    (cd "$src" && CARGO_TARGET_DIR=$target cargo run -q --release -p xtask -- layer-manifest /tmp/gv-stage/layer)
    sed 's#"library_path": "[^"]*"#"library_path": "./libgpu_crash_drill_layer.so"#' \
        /tmp/gv-stage/layer/VK_LAYER_gpu_crash_drill.json > .devrun/layer/VK_LAYER_gpu_crash_drill.json
    cp "$target/release/examples/gpu_validation" "$target/release/examples/crash_drill" /tmp/gv-stage/
    strip /tmp/gv-stage/gpu_validation /tmp/gv-stage/crash_drill
    # Two stripped binaries are 74 MB, over the 64 MiB a call may carry: xz them (about 14 MB).
    tar -C /tmp/gv-stage -cf - gpu_validation crash_drill | xz -T0 -6 > .devrun/bins.tar.xz
    ls -la .devrun .devrun/layer
}

setup_device() {
    set +e  # every step records its exit code and the batch goes on
    : "${OUT:?OUT must be set (the device tool sets it)}"
    if [ -z "${GV_SKIP_DEBS:-}" ]; then
        for f in .gl/*.deb; do dpkg -x "$f" /; done
        ldconfig
    fi
    # GV_VK_DRIVER_FILES: only to rehearse this function on another driver (e.g. lavapipe).
    export VK_DRIVER_FILES=${GV_VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
    export XDG_RUNTIME_DIR=/tmp RUST_LOG=warn NO_COLOR=1
    bin=/tmp/gv-bin logs=/tmp/gv-logs
    mkdir -p $bin $logs
    [ -f .devrun/bins.tar.xz ] && tar -C $bin -xJf .devrun/bins.tar.xz
    layer=$ROOT/.devrun/layer
    {
        date -u
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    } > $logs/env.txt 2>&1 || true
    cat $logs/env.txt

}

# Batch 1 (run 1): capture, drills, overhead, real fault with a 3 s hang timeout.
device() {
    setup_device
    echo "== (a) capture, 300 frames"
    GPU_CRASH_REPORT_DIR=$logs/capture-reports timeout -s KILL 90 $bin/gpu_validation capture \
        > $logs/capture.out 2> $logs/capture.err; echo "rc=$?" >> $logs/capture.out
    grep -v "last frames" $logs/capture.out | cut -c1-600

    echo "== (b) drill scenarios through VK_LAYER_gpu_crash_drill on the real driver"
    for s in use-after-free out-of-bounds in-bounds hang; do
        VK_LAYER_PATH=$layer VK_INSTANCE_LAYERS=VK_LAYER_gpu_crash_drill GPU_CRASH_DRILL=$s \
            GPU_CRASH_REPORT_DIR=$logs/drill-$s CRASH_DRILL_HANG_TIMEOUT_MS=2000 \
            timeout -s KILL 60 $bin/crash_drill > $logs/drill-$s.out 2> $logs/drill-$s.err
        echo "$s rc=$?" | tee -a $logs/drill-$s.out
        grep -E "injected|GPU fault|GPU hang|report written" $logs/drill-$s.err | cut -c1-400 || true
    done
    pack

    echo "== (d) overhead: same workload with and without the plugin, alternating"
    for i in 1 2 3; do
        for p in plugin no-plugin; do
            local flag=""; [ $p = no-plugin ] && flag=--no-plugin
            GPU_VALIDATION_FRAMES=2000 timeout -s KILL 90 $bin/gpu_validation capture $flag \
                > $logs/overhead-$p-$i.out 2> $logs/overhead-$p-$i.err
            echo "$p $i rc=$? $(grep -o '"median_frame_us":[0-9]*' $logs/overhead-$p-$i.out)"
        done
    done
    pack

    echo "== (c) real fault, no layer: descriptor use-after-free, hang_timeout 3 s"
    dmesg 2>/dev/null | grep -i xid | tail -3 > $logs/xid-before.txt || true
    local t0; t0=$(date +%s.%N)
    GPU_CRASH_REPORT_DIR=$logs/real-fault GPU_VALIDATION_HANG_TIMEOUT_MS=3000 \
        timeout -s KILL 40 $bin/gpu_validation real-fault > $logs/real-fault.out 2> $logs/real-fault.err
    echo "real-fault rc=$? after $(echo "$(date +%s.%N) - $t0" | bc 2>/dev/null || echo '?') s" | tee -a $logs/real-fault.out
    grep -E "gpu_validation|GPU hang|GPU fault|report written|GPU_VALIDATION_RESULT" $logs/real-fault.out $logs/real-fault.err | cut -c1-500 || true
    (dmesg 2>/dev/null | grep -i xid | tail -5 || echo "dmesg not readable") > $logs/xid-after.txt
    cat $logs/xid-after.txt
    timeout -s KILL 15 nvidia-smi --query-gpu=name,utilization.gpu,memory.used --format=csv > $logs/after-smi.txt 2>&1 || true
    cat $logs/after-smi.txt
    pack
    ls -la "$OUT"
}

pack() { tar -C /tmp -czf "$OUT/gv-results.tar.gz" gv-logs; }

# Batch 2 (run 2): what batch 1 raised. The live table and allocator blocks behind the resolved
# fraction; the overhead under 200 extra buffers a frame (~2,000 binding events a frame); and the real
# fault again with the watchdog out of the way (hang_timeout 120 s), to see whether the driver
# declares the device lost by itself and what vkGetDeviceFaultInfoEXT then says.
device2() {
    setup_device
    echo "== capture with dump"
    GPU_VALIDATION_DUMP=$logs/capture-dump.json timeout -s KILL 90 $bin/gpu_validation capture \
        > $logs/capture2.out 2> $logs/capture2.err; echo "rc=$?" >> $logs/capture2.out
    grep -E "resolved|binding events|median" $logs/capture2.out | cut -c1-400
    echo "== overhead with GPU_VALIDATION_CHURN=200 (150 frames), alternating"
    for i in 1 2 3; do
        for p in plugin no-plugin; do
            local flag=""; [ $p = no-plugin ] && flag=--no-plugin
            GPU_VALIDATION_CHURN=200 GPU_VALIDATION_FRAMES=150 timeout -s KILL 90 $bin/gpu_validation capture $flag \
                > $logs/churn-$p-$i.out 2> $logs/churn-$p-$i.err
            echo "$p $i rc=$? $(grep -o '"median_frame_us":[0-9]*' $logs/churn-$p-$i.out) $(grep -o '"events":{[^}]*}' $logs/churn-$p-$i.out | cut -c1-80) $(grep -o '"dropped":[0-9]*' $logs/churn-$p-$i.out)"
        done
    done
    pack
    echo "== real fault, hang_timeout 120 s (watchdog out of the way), deadline 75 s"
    local t0; t0=$(date +%s)
    GPU_CRASH_REPORT_DIR=$logs/real-fault2 GPU_VALIDATION_HANG_TIMEOUT_MS=120000 GPU_VALIDATION_DEADLINE_S=75 \
        timeout -s KILL 100 $bin/gpu_validation real-fault > $logs/real-fault2.out 2> $logs/real-fault2.err
    echo "real-fault2 rc=$? after $(( $(date +%s) - t0 )) s" | tee -a $logs/real-fault2.out
    grep -vE "raw fence Ok|CommandQueue" $logs/real-fault2.err | cut -c1-400 | tail -40
    cat $logs/real-fault2.out | cut -c1-400
    timeout -s KILL 15 nvidia-smi --query-gpu=name,utilization.gpu,memory.used --format=csv > $logs/after-smi2.txt 2>&1 || true
    cat $logs/after-smi2.txt
    pack
    ls -la "$OUT"
}

# Batch 3 (run 3): the same capture and drill scenarios on a later commit (2923e75: containment match
# in learn_names, a later teardown cut), to re-measure what batch 1 found.
device3() {
    setup_device
    echo "== capture with dump"
    GPU_VALIDATION_DUMP=$logs/capture3-dump.json timeout -s KILL 90 $bin/gpu_validation capture \
        > $logs/capture3.out 2> $logs/capture3.err; echo "rc=$?" >> $logs/capture3.out
    grep -E "resolved|binding events|median" $logs/capture3.out | cut -c1-400
    echo "== drill scenarios"
    for s in use-after-free out-of-bounds in-bounds hang; do
        VK_LAYER_PATH=$layer VK_INSTANCE_LAYERS=VK_LAYER_gpu_crash_drill GPU_CRASH_DRILL=$s \
            GPU_CRASH_REPORT_DIR=$logs/drill3-$s CRASH_DRILL_HANG_TIMEOUT_MS=2000 \
            timeout -s KILL 60 $bin/crash_drill > $logs/drill3-$s.out 2> $logs/drill3-$s.err
        echo "$s rc=$?" | tee -a $logs/drill3-$s.out
        grep -E "injected|^GPU fault|^GPU hang" $logs/drill3-$s.err | cut -c1-300 || true
    done
    pack
    ls -la "$OUT"
}


# Batch 4 (after the watchdog fixes): real fault with the 3 s watchdog, and the drill hang's exit code.
#   run(command="bash scripts/gpu-validation.sh device4", carry=[".gl", ".devrun"], timeout_s=240)
device4() {
    setup_device
    echo "== real fault, hang_timeout 3 s, deadline 60 s"
    t0=$(date +%s)
    GPU_CRASH_REPORT_DIR=$logs/real-fault4 GPU_VALIDATION_HANG_TIMEOUT_MS=3000 GPU_VALIDATION_DEADLINE_S=60 \
        timeout -s KILL 90 $bin/gpu_validation real-fault > $logs/real-fault4.out 2> $logs/real-fault4.err
    echo "real-fault4 rc=$? after $(( $(date +%s) - t0 )) s" | tee -a $logs/real-fault4.out
    grep -E "gpu_validation|GPU hang|GPU fault|report written|GPU_VALIDATION_RESULT|could NOT" \
        $logs/real-fault4.out $logs/real-fault4.err | cut -c1-500 | head -20 || true
    echo "== drill hang, exit code"
    VK_LAYER_PATH=$ROOT/.devrun/layer VK_INSTANCE_LAYERS=VK_LAYER_gpu_crash_drill GPU_CRASH_DRILL=hang \
        GPU_CRASH_REPORT_DIR=$logs/drill4-hang CRASH_DRILL_HANG_TIMEOUT_MS=2000 \
        timeout -s KILL 60 $bin/crash_drill > $logs/drill4-hang.out 2> $logs/drill4-hang.err
    echo "drill4-hang rc=$?"
    grep -E "injected|^GPU hang|report written" $logs/drill4-hang.err | cut -c1-400 || true
    tar -C $logs -czf "$OUT/run4-results.tar.gz" .
}

# Build for batch 5 (issues 10-11, breadcrumbs): dev-profile binaries (dependencies at opt-level 1,
# as the tests; a release build of Bevy does not fit this session on 2 cores), plus the breadcrumbs
# test binary whose ignored `child` test is a Camera3d app.
build5() {
    cargo build --example gpu_validation --example frame_overhead --example crash_drill
    # The layer as the tests built it (`cargo xtask layer-manifest`, run by tests/breadcrumbs.rs).
    cargo test --test breadcrumbs --no-run 2>&1 | tail -1
    [ -f target/tmp/drill-layer/VK_LAYER_gpu_crash_drill.json ] \
        || cargo run -q -p xtask -- layer-manifest target/tmp/drill-layer
    local child
    child=$(ls -t target/debug/deps/breadcrumbs-* | grep -v '\.d$' | head -1)
    rm -rf .devrun && mkdir -p .devrun/layer /tmp/gv-stage && rm -rf /tmp/gv-stage/*
    cp target/debug/libgpu_crash_drill_layer.so .devrun/layer/
    sed 's#"library_path": "[^"]*"#"library_path": "./libgpu_crash_drill_layer.so"#' \
        target/tmp/drill-layer/VK_LAYER_gpu_crash_drill.json \
        > .devrun/layer/VK_LAYER_gpu_crash_drill.json
    cp target/debug/examples/gpu_validation target/debug/examples/frame_overhead \
        target/debug/examples/crash_drill /tmp/gv-stage/
    cp "$child" /tmp/gv-stage/breadcrumbs_test
    strip /tmp/gv-stage/gpu_validation /tmp/gv-stage/frame_overhead /tmp/gv-stage/crash_drill \
        /tmp/gv-stage/breadcrumbs_test .devrun/layer/libgpu_crash_drill_layer.so
    tar -C /tmp/gv-stage -cf - gpu_validation frame_overhead crash_drill breadcrumbs_test \
        | xz -T0 -6 > .devrun/bins.tar.xz
    git rev-parse HEAD > .devrun/commit
    ls -la .devrun .devrun/layer
}

# Batch 5: the real fault with its compute pass labelled, a 20 s healthy pause, the drill's
# hang-in-pass in a Camera3d app, and the breadcrumbs' frame-time cost.
device5() {
    setup_device
    echo "commit $(cat .devrun/commit)" | tee -a $logs/env.txt
    echo "== (1) real fault, hang timeout 3 s"
    t0=$(date +%s)
    GPU_VALIDATION_HANG_TIMEOUT_MS=3000 GPU_VALIDATION_DEADLINE_S=60 GPU_CRASH_REPORT_DIR=$logs/real-fault \
        timeout -s KILL 120 $bin/gpu_validation real-fault > $logs/real-fault.out 2> $logs/real-fault.err
    echo "real-fault rc=$? after $(( $(date +%s) - t0 )) s"
    grep -E "GPU hang|report written|GPU_VALIDATION_RESULT|submitted" $logs/real-fault.err \
        $logs/real-fault.out | cut -c1-400 | head -8 || true
    echo "== (2) a 20 s pause of the main thread, hang timeout 3 s: no report expected"
    t0=$(date +%s)
    GPU_VALIDATION_PAUSE_S=20 GPU_VALIDATION_FRAMES=200 GPU_VALIDATION_HANG_TIMEOUT_MS=3000 \
        GPU_CRASH_REPORT_DIR=$logs/pause timeout -s KILL 120 $bin/gpu_validation capture \
        > $logs/pause.out 2> $logs/pause.err
    echo "pause rc=$? after $(( $(date +%s) - t0 )) s; reports: $(ls $logs/pause/*.json 2>/dev/null | wc -l)"
    grep -E "pausing|pause over|GPU hang" $logs/pause.err | cut -c1-300 | head -5 || true
    echo "== (3) drill hang-in-pass:main_opaque_pass_3d in a Camera3d app"
    t0=$(date +%s)
    VK_LAYER_PATH=$layer VK_INSTANCE_LAYERS=VK_LAYER_gpu_crash_drill \
        GPU_CRASH_DRILL=hang-in-pass:main_opaque_pass_3d GPU_CRASH_REPORT_DIR=$logs/hang-in-pass \
        timeout -s KILL 90 $bin/breadcrumbs_test --exact child --ignored --nocapture \
        > $logs/hang-in-pass.out 2> $logs/hang-in-pass.err
    echo "hang-in-pass rc=$? after $(( $(date +%s) - t0 )) s"
    grep -E "injected|GPU hang|report written|buffer marker" $logs/hang-in-pass.err | cut -c1-400 | head -6 || true
    echo "== (4) breadcrumbs cost: 3D scene, no churn, alternating processes"
    timeout -s KILL 300 $bin/frame_overhead --compare --scene --churn 0 --rounds 5 --frames 400 --warmup 100 \
        > $logs/overhead-scene.out 2> $logs/overhead-scene.err
    echo "overhead-scene rc=$?"; grep -E "summary|frame_overhead plugin" $logs/overhead-scene.out | cut -c1-300
    tar -C $logs -czf "$OUT/run5-results.tar.gz" .
}

# Batch 6: batch 5 again after two fixes it found (breadcrumb begin markers at BOTTOM_OF_PIPE, the
# frame-end marker after the app's Cleanup-time submits), and the cost runs with the child's stderr.
device6() {
    setup_device
    echo "commit $(cat .devrun/commit)" | tee -a $logs/env.txt
    echo "== (1) real fault, hang timeout 3 s"
    GPU_VALIDATION_HANG_TIMEOUT_MS=3000 GPU_VALIDATION_DEADLINE_S=60 GPU_CRASH_REPORT_DIR=$logs/real-fault \
        timeout -s KILL 120 $bin/gpu_validation real-fault > $logs/real-fault.out 2> $logs/real-fault.err
    echo "real-fault rc=$?"
    grep -E "^GPU hang" $logs/real-fault.err | cut -c1-400 | head -3 || true
    echo "== (2) drill hang-in-pass:main_opaque_pass_3d in a Camera3d app"
    VK_LAYER_PATH=$layer VK_INSTANCE_LAYERS=VK_LAYER_gpu_crash_drill \
        GPU_CRASH_DRILL=hang-in-pass:main_opaque_pass_3d GPU_CRASH_REPORT_DIR=$logs/hang-in-pass \
        timeout -s KILL 90 $bin/breadcrumbs_test --exact child --ignored --nocapture \
        > $logs/hang-in-pass.out 2> $logs/hang-in-pass.err
    echo "hang-in-pass rc=$?"
    grep -E "injected|^GPU hang" $logs/hang-in-pass.err | cut -c1-400 | head -4 || true
    echo "== (3) one scene run, no plugin, stderr kept"
    t0=$(date +%s)
    RUST_LOG=info timeout -s KILL 90 $bin/frame_overhead --no-plugin --scene --churn 0 --frames 100 --warmup 20 \
        > $logs/scene-one.out 2> $logs/scene-one.err
    echo "scene-one rc=$? after $(( $(date +%s) - t0 )) s"; cat $logs/scene-one.out
    grep -iE "error|panic|warn" $logs/scene-one.err | cut -c1-300 | head -8 || true
    echo "== (4) breadcrumbs cost: 3D scene, no churn, alternating processes"
    timeout -s KILL 200 $bin/frame_overhead --compare --scene --churn 0 --rounds 5 --frames 300 --warmup 60 \
        > $logs/overhead-scene.out 2> $logs/overhead-scene.err
    echo "overhead-scene rc=$?"; grep -E "summary|frame_overhead plugin" $logs/overhead-scene.out | cut -c1-300
    echo "== (5) 1,000 buffers churned per frame, no scene, alternating processes"
    timeout -s KILL 150 $bin/frame_overhead --compare --rounds 3 --frames 300 --warmup 60 \
        > $logs/overhead-churn.out 2> $logs/overhead-churn.err
    echo "overhead-churn rc=$?"; grep -E "summary|frame_overhead plugin" $logs/overhead-churn.out | cut -c1-300
    tar -C $logs -czf "$OUT/run6-results.tar.gz" .
}

# Batch 7: the breadcrumbs' cost in the 3D scene, now with one frame in flight (batch 6's scene runs
# piled work up offscreen until the device was lost, with or without the plugin).
device7() {
    setup_device
    echo "commit $(cat .devrun/commit)" | tee -a $logs/env.txt
    timeout -s KILL 280 $bin/frame_overhead --compare --scene --churn 0 --rounds 5 --frames 300 --warmup 60 \
        > $logs/overhead-scene.out 2> $logs/overhead-scene.err
    echo "overhead-scene rc=$?"; grep -E "summary|frame_overhead plugin" $logs/overhead-scene.out | cut -c1-300
    grep -E "panicked|DeviceLost" $logs/overhead-scene.err | head -3
    tar -C $logs -czf "$OUT/run7-results.tar.gz" .
}

# Batch 8: frame overhead under 1,000 buffers churned per frame with the allocation-free index.
device8() {
    setup_device
    echo "commit $(cat .devrun/commit)" | tee -a $logs/env.txt
    timeout -s KILL 200 $bin/frame_overhead --compare --rounds 3 --frames 300 --warmup 60 \
        > $logs/overhead-churn.out 2> $logs/overhead-churn.err
    echo "overhead-churn rc=$?"; grep -E "summary|frame_overhead plugin" $logs/overhead-churn.out | cut -c1-300
    tar -C $logs -czf "$OUT/run8-results.tar.gz" .
}

# Build for batch 9: the realistic-scene benchmark (bench/realistic_scene, its own crate outside the
# workspace, release; it shares the root's release Bevy in target/). Built from the working tree, so
# the commit file says "-dirty" when src/ had edits in progress. Leaves .devrun/bins.tar.xz alone.
#   run(command="bash scripts/gpu-validation.sh device9", carry=[".gl", ".devrun"], timeout_s=420)
build9() {
    local target=${CARGO_TARGET_DIR:-$ROOT/target}
    (cd bench/realistic_scene && CARGO_TARGET_DIR=$target nice -n 10 cargo build --release)
    mkdir -p .devrun /tmp/gv-stage9 && rm -f /tmp/gv-stage9/realistic_scene .devrun/scene.tar.xz
    cp "$target/release/realistic_scene" /tmp/gv-stage9/
    strip /tmp/gv-stage9/realistic_scene
    tar -C /tmp/gv-stage9 -cf - realistic_scene | xz -T0 -6 > .devrun/scene.tar.xz
    git describe --always --dirty --abbrev=12 > .devrun/scene.commit
    ls -la .devrun
}

# Batch 9: the plugin's frame cost in a realistic scene (3,000 PBR meshes, 6 materials, shadowed sun
# + 4 shadowed point lights, 1920x1080 offscreen, 50 meshes replaced per frame): no plugin, plugin
# with everything on, plugin without breadcrumbs, alternating processes. Under 6 minutes: a short
# single run first (sanity, shader cache, frame time), then --compare with --frames cut so that
# 3 x rounds runs fit in SCENE_BUDGET_S (the whole compare is killed at SCENE_BUDGET_S + 60 s).
device9() {
    setup_device
    tar -C $bin -xJf .devrun/scene.tar.xz
    echo "scene commit $(cat .devrun/scene.commit)" | tee -a $logs/env.txt
    local rounds=${SCENE_ROUNDS:-5} frames=${SCENE_FRAMES:-600} warmup=${SCENE_WARMUP:-120}
    local budget=${SCENE_BUDGET_S:-240}
    echo "== (1) one short run, plugin all on, stderr kept"
    local t0; t0=$(date +%s)
    RUST_LOG=info timeout -s KILL 60 $bin/realistic_scene --frames 60 --warmup 10 \
        > $logs/scene-one.out 2> $logs/scene-one.err
    echo "scene-one rc=$? after $(( $(date +%s) - t0 )) s"; cat $logs/scene-one.out
    grep -iE "panicked|error|DeviceLost|GPU crash reporter" $logs/scene-one.err | cut -c1-300 | head -8 || true
    # Frames per run that fit the budget, from the short run's median (+ 3 s start-up per run).
    local med cap
    med=$(grep -o 'median_us=[0-9.]*' $logs/scene-one.out | cut -d= -f2)
    if [ -n "$med" ]; then
        cap=$(awk -v m="$med" -v b="$budget" -v n="$rounds" -v w="$warmup" \
            'BEGIN { f = int(((b / (3 * n)) - 3) * 1e6 / m) - w; print (f < 50 ? 50 : f) }')
        [ "$cap" -lt "$frames" ] && { echo "frames cut from $frames to $cap (median $med us)"; frames=$cap; }
    fi
    echo "== (2) compare: --rounds $rounds --frames $frames --warmup $warmup"
    t0=$(date +%s)
    timeout -s KILL $(( budget + 60 )) $bin/realistic_scene --compare --rounds $rounds \
        --frames $frames --warmup $warmup > $logs/scene.out 2> $logs/scene.err
    echo "scene rc=$? after $(( $(date +%s) - t0 )) s"
    grep -E "summary|ratio|realistic_scene plugin" $logs/scene.out | cut -c1-400
    grep -E "realistic_scene_info" $logs/scene.out | sort -u | cut -c1-300
    grep -E "panicked|DeviceLost" $logs/scene.err | head -3
    tar -C $logs -czf "$OUT/run9-results.tar.gz" .
}

# Batch 10 (issue 12, release binaries): ring bench on 16 cores, churn frame overhead, realistic scene.
build10() {
    local target=${CARGO_TARGET_DIR:-$ROOT/target}
    cargo build --release --example frame_overhead
    local bench
    bench=$(cargo bench --no-run --bench binding_ring 2>&1 | grep -o 'target/release/deps/binding_ring-[0-9a-f]*' | tail -1)
    (cd bench/realistic_scene && CARGO_TARGET_DIR=$target cargo build --release)
    rm -rf /tmp/gv-stage10 && mkdir -p .devrun /tmp/gv-stage10
    cp "$target/release/examples/frame_overhead" "$target/release/realistic_scene" /tmp/gv-stage10/
    cp "$bench" /tmp/gv-stage10/binding_ring
    strip /tmp/gv-stage10/*
    tar -C /tmp/gv-stage10 -cf - frame_overhead realistic_scene binding_ring | xz -T0 -6 > .devrun/b10.tar.xz
    git rev-parse --short=12 HEAD > .devrun/b10.commit
    ls -la .devrun
}
device10() {
    setup_device
    tar -C $bin -xJf .devrun/b10.tar.xz
    echo "commit $(cat .devrun/b10.commit)" | tee -a $logs/env.txt
    nproc | tee -a $logs/env.txt
    local t0; t0=$(date +%s)
    echo "== (1) binding_ring (criterion, 16 cores)"
    (cd /tmp && timeout -s KILL 150 $bin/binding_ring --bench --noplot --measurement-time 3 --warm-up-time 1 \
        > $logs/ring.out 2> $logs/ring.err)
    echo "ring rc=$? after $(( $(date +%s) - t0 )) s"
    grep -E "^[a-z_]+/|time:" $logs/ring.out | paste - - | sed 's/  */ /g' | cut -c1-200
    echo "== (2) frame_overhead, 1,000 buffers churned per frame"
    t0=$(date +%s)
    timeout -s KILL 150 $bin/frame_overhead --compare --rounds 3 --frames 300 --warmup 60 \
        > $logs/churn.out 2> $logs/churn.err
    echo "churn rc=$? after $(( $(date +%s) - t0 )) s"
    grep -vE "^frame_overhead plugin" $logs/churn.out | cut -c1-300 | tail -25
    echo "== (3) realistic scene"
    t0=$(date +%s)
    timeout -s KILL 230 $bin/realistic_scene --compare --rounds 5 --frames 600 --warmup 120 \
        > $logs/scene.out 2> $logs/scene.err
    echo "scene rc=$? after $(( $(date +%s) - t0 )) s"
    grep -vE "^realistic_scene plugin|realistic_scene_info" $logs/scene.out | cut -c1-300 | tail -30
    grep -E "realistic_scene_info" $logs/scene.out | sort -u | cut -c1-300
    grep -E "panicked|DeviceLost|GPU hang" $logs/scene.err $logs/churn.err | head -3
    tar -C $logs -czf "$OUT/run10-results.tar.gz" .
}

# Batch 11: batch 10 again after `VK_EXT_debug_utils` became conditional on binding capture, with
# shorter scene runs (more rounds in the time) and the scene's capture-off configuration.
device11() {
    setup_device
    tar -C $bin -xJf .devrun/b10.tar.xz
    echo "commit $(cat .devrun/b10.commit)" | tee -a $logs/env.txt
    local t0; t0=$(date +%s)
    echo "== (1) frame_overhead, 1,000 buffers churned per frame"
    timeout -s KILL 150 $bin/frame_overhead --compare --rounds 5 --frames 300 --warmup 60 \
        > $logs/churn.out 2> $logs/churn.err
    echo "churn rc=$? after $(( $(date +%s) - t0 )) s"
    grep -vE "^  frame_overhead plugin" $logs/churn.out | cut -c1-300 | tail -12
    echo "== (2) realistic scene"
    t0=$(date +%s)
    timeout -s KILL 330 $bin/realistic_scene --compare --rounds 5 --frames 150 --warmup 30 \
        > $logs/scene.out 2> $logs/scene.err
    echo "scene rc=$? after $(( $(date +%s) - t0 )) s"
    grep -vE "^  realistic_scene plugin|realistic_scene_info" $logs/scene.out | cut -c1-400 | tail -16
    grep -E "realistic_scene_info" $logs/scene.out | sort -u | cut -c1-300
    grep -E "panicked|DeviceLost|GPU hang" $logs/scene.err $logs/churn.err | head -3
    tar -C $logs -czf "$OUT/run11-results.tar.gz" .
}

# Batch 12 (not run yet: no machine was lent at 11:01-11:13 UTC on 2026-12-03): where the GPU
# breadcrumbs' CPU cost goes, by a perf profile on the h200 host. `perf` is not installed there and the
# host has no network, so this machine's perf and its libraries (not glibc) travel in .devrun/perf.tar.xz
# with the unstripped scene binary.
build12() {
    (cd bench/realistic_scene && cargo build --release)
    rm -rf /tmp/pk && mkdir -p /tmp/pk
    cp target/release/realistic_scene /tmp/pk/
    stage_perf /tmp/pk
    pack_devrun /tmp/pk perf
}
device12() {
    setup_device
    mkdir -p /tmp/p && tar -C /tmp/p -xJf .devrun/perf.tar.xz
    echo -1 > /proc/sys/kernel/perf_event_paranoid 2>/dev/null
    local c a
    for c in no-breadcrumbs all; do
        a=""; [ $c = no-breadcrumbs ] && a=--no-breadcrumbs
        (cd /tmp/p && LD_LIBRARY_PATH=/tmp/p/lib timeout 90 ./perf record -F 499 -g -o $c.data -- \
            ./realistic_scene --frames 150 --warmup 30 $a > $logs/$c.out 2> $logs/$c.err)
        grep "realistic_scene plugin" $logs/$c.out | cut -c1-200
        (cd /tmp/p && LD_LIBRARY_PATH=/tmp/p/lib ./perf report -i $c.data --sort dso --stdio --no-children) \
            2>/dev/null | grep "%" | head -12
        (cd /tmp/p && LD_LIBRARY_PATH=/tmp/p/lib ./perf report -i $c.data --sort dso,sym --stdio \
            --no-children -g none) 2>/dev/null | grep "%" | head -25 | cut -c1-160
    done
}

# Batches 13-16: build12's package (perf, its libraries, the unstripped scene) into /tmp/p.
unpack_perf_package() {
    unpack_devrun perf /tmp/p
}

# Copies perf and the shared libraries it needs (but the C library's, which the host has) into DIR
# and DIR/lib, for a host without perf.
stage_perf() {
    mkdir -p "$1/lib"
    cp /usr/bin/perf "$1/"
    ldd /usr/bin/perf | awk '{print ($3 == "" ? $1 : $3)}' | grep '^/' \
        | grep -vE 'libc.so|libm.so|ld-linux|libpthread|libdl.so|librt.so' | xargs -I{} cp -L {} "$1/lib/"
}

# Here: packs DIR into .devrun/NAME.tar.xz, with the commit it was built from in .devrun/NAME.commit.
pack_devrun() {
    mkdir -p .devrun
    tar -C "$1" -cf - . | xz -T0 -6 > ".devrun/$2.tar.xz"
    git rev-parse --short=12 HEAD > ".devrun/$2.commit"
    ls -la .devrun
}

# There: the ring against crossbeam, five runs of the bench in DIR, each killed after KILL_S seconds.
ring_bench_five() {
    local dir=$1 kill_s=$2 i
    for i in 1 2 3 4 5; do
        (cd "$dir" && timeout -s KILL "$kill_s" ./binding_ring --bench --noplot 'this_crate|crossbeam' \
            > $logs/ring-$i.out 2>&1)
        grep -E "^binding_ring/|time:" $logs/ring-$i.out | paste - - | sed 's/  */ /g' | cut -c1-160
    done
}

# There: ROUNDS rounds of single pinned processes from DIR, alternating the ring before the prefetch
# (frame_overhead_base), after it, and the floor, into $logs/before-after.out.
alternate_before_after() {
    local dir=$1 rounds=$2 i c label exe flag
    for i in $(seq "$rounds"); do
        for c in base:frame_overhead_base: head:frame_overhead: floor:frame_overhead:--floor; do
            IFS=: read -r label exe flag <<< "$c"
            echo -n "$label "
            taskset -c 0-7 timeout -s KILL 30 "$dir/$exe" $flag --frames 300 --warmup 60 2>/dev/null \
                | grep "^frame_overhead plugin"
        done
    done > $logs/before-after.out
}

# There: one asset_naming child from DIR under the drill (CASE, SCENARIO; the image case needs no
# aim file), its output in $logs/an-STEM.{out,err}; the caller's environment passes through
# (GPU_CRASH_SEGV_TRACE). Prints the exit code line.
asset_naming_case() {
    local dir=$1 case=$2 scenario=$3 stem=$4
    rm -rf /tmp/an-$case && mkdir -p /tmp/an-$case
    local aim=/tmp/an-$case/aim; [ $case = image ] && aim=""
    (cd "$dir" && env ASSET_NAMING_ASSETS=$dir/assets ASSET_NAMING_CASE=$case \
        ${aim:+GPU_CRASH_DRILL_AIM=$aim} GPU_CRASH_DRILL=$scenario GPU_CRASH_DRILL_AFTER=1 \
        GPU_CRASH_DRILL_PRECISION=4 GPU_CRASH_REPORT_DIR=/tmp/an-$case/reports \
        VK_LAYER_PATH=$dir/layer VK_INSTANCE_LAYERS=VK_LAYER_gpu_crash_drill \
        timeout -s KILL 60 ./asset_naming --exact child --ignored --nocapture \
        > $logs/an-$stem.out 2> $logs/an-$stem.err)
    echo "asset $stem rc=$?"
}

# There: unpacks .devrun/NAME.tar.xz into DIR and notes its commit in the batch's env.txt.
unpack_devrun() {
    mkdir -p "$2" && tar -C "$2" -xJf ".devrun/$1.tar.xz"
    echo "commit $(cat ".devrun/$1.commit")" | tee -a $logs/env.txt
}

# Batches 14 and 16: breadcrumbs off vs everything on, in `rounds` rounds, with the temporary switch
# EXP_BREADCRUMBS=`variant` (killed after `kill_s` seconds).
breadcrumbs_on_off() {
    local variant=$1 rounds=$2 kill_s=$3 t0
    t0=$(date +%s)
    EXP_BREADCRUMBS=$variant timeout -s KILL $kill_s /tmp/p/realistic_scene --compare --configs 3,1 \
        --rounds $rounds --frames 120 --warmup 20 > $logs/scene-$variant.out 2> $logs/scene-$variant.err
    echo "scene rc=$? after $(( $(date +%s) - t0 )) s"
    grep -E "ratio|summary" $logs/scene-$variant.out | cut -c1-400
    grep -E "panicked|DeviceLost|GPU hang" $logs/scene-$variant.err | head -3
}

# Batch 13 (issue 12): batch 12's profile with DWARF call graphs (release binaries have no frame
# pointers), so the breadcrumb systems' inclusive share of the process shows; then the two
# breadcrumb configurations alone, eight rounds, with per-round paired ratios. Uses build12's package.
device13() {
    setup_device
    unpack_perf_package
    echo -1 > /proc/sys/kernel/perf_event_paranoid 2>/dev/null
    local c a t0
    for c in no-breadcrumbs all; do
        a=""; [ $c = no-breadcrumbs ] && a=--no-breadcrumbs
        t0=$(date +%s)
        (cd /tmp/p && LD_LIBRARY_PATH=/tmp/p/lib timeout 120 ./perf record -F 199 --call-graph dwarf,8192 \
            -o $c.data -- ./realistic_scene --frames 120 --warmup 30 $a > $logs/$c.out 2> $logs/$c.err)
        echo "perf $c rc=$? after $(( $(date +%s) - t0 )) s"
        grep "realistic_scene plugin" $logs/$c.out | cut -c1-200
        (cd /tmp/p && LD_LIBRARY_PATH=/tmp/p/lib timeout 100 ./perf report -i $c.data --children \
            --sort symbol --stdio -g none --percent-limit 0.05 > $logs/$c.children.txt 2> $logs/$c.report.err)
        echo "report rc=$? after $(( $(date +%s) - t0 )) s; samples: $(grep -m1 'Samples' $logs/$c.children.txt)"
        grep -iE "breadcrumb|mark_stage|mark_frame|marks_command|raw_command_buffer|record_marker|\
create_command_encoder|queue_submit|Queue.*submit|render_system|RenderGraph|worker_thread" \
            $logs/$c.children.txt | head -30 | cut -c1-190
    done
    tar -C /tmp/p -czf $logs/perf-data.tar.gz no-breadcrumbs.data all.data 2>/dev/null
    echo "== breadcrumbs on vs off, 8 rounds"
    t0=$(date +%s)
    timeout -s KILL 270 /tmp/p/realistic_scene --compare --configs 3,1 --rounds 8 --frames 150 \
        --warmup 30 > $logs/scene.out 2> $logs/scene.err
    echo "scene rc=$? after $(( $(date +%s) - t0 )) s"
    grep -vE "^  realistic_scene plugin|realistic_scene_info" $logs/scene.out | cut -c1-400 | tail -8
    grep -E "panicked|DeviceLost|GPU hang" $logs/scene.err | head -3
    tar -C $logs --exclude perf-data.tar.gz -czf "$OUT/run13-results.tar.gz" .
}

# Batch 14 (issue 12): which part of the breadcrumbs costs. Built by build12 from a tree with a
# temporary, uncommitted switch EXP_BREADCRUMBS (BENCHMARKS.md gives the diff): `none` records no
# stage-boundary command buffers (VK_AMD_buffer_marker still enabled, the frame-start marker still
# written); `top` writes every breadcrumb at TOP_OF_PIPE instead of BOTTOM_OF_PIPE (no wait for earlier
# work). Each: breadcrumbs on vs off, eight rounds.
device14() {
    setup_device
    unpack_perf_package
    local v
    for v in unchanged none top; do
        echo "== EXP_BREADCRUMBS=$v"
        breadcrumbs_on_off $v 8 170
    done
    tar -C $logs -czf "$OUT/run14-results.tar.gz" .
}

# Batch 15 (issue 12): batch 14 showed the stage-boundary command buffers cost CPU whatever stage
# the marker waits for; where that CPU goes, by self time per thread, library and symbol (no call
# graphs: batch 13's DWARF unwinding did not finish in 100 s). Same package as batch 14.
device15() {
    setup_device
    unpack_perf_package
    echo -1 > /proc/sys/kernel/perf_event_paranoid 2>/dev/null
    local v t0 r
    for v in none unchanged; do
        t0=$(date +%s)
        (cd /tmp/p && EXP_BREADCRUMBS=$v LD_LIBRARY_PATH=/tmp/p/lib timeout 60 ./perf record -F 999 \
            -o $v.data -- ./realistic_scene --frames 150 --warmup 30 > $logs/$v.out 2> $logs/$v.err)
        echo "== EXP_BREADCRUMBS=$v: perf rc=$? after $(( $(date +%s) - t0 )) s"
        grep "realistic_scene plugin" $logs/$v.out | cut -c1-200
        r="env LD_LIBRARY_PATH=/tmp/p/lib timeout 60 ./perf report -i $v.data --stdio --no-children"
        (cd /tmp/p && $r --sort comm > $logs/$v.comm.txt 2>&1; $r --sort dso > $logs/$v.dso.txt 2>&1; \
            $r --sort dso,sym > $logs/$v.sym.txt 2>&1)
        grep -m1 "Samples" $logs/$v.dso.txt
        grep "%" $logs/$v.comm.txt | head -12
        grep "%" $logs/$v.dso.txt | head -12
        grep "%" $logs/$v.sym.txt | head -40 | cut -c1-170
    done
    tar -C $logs -czf "$OUT/run15-results.tar.gz" .
}

# Batch 16 (issue 12): does the breadcrumbs' cost scale with the number of stage-boundary command
# buffers? Built by build12 with a temporary, uncommitted switch: EXP_BREADCRUMBS=main records only the
# two boundaries around MainPass (2 command buffers per camera instead of 5).
device16() {
    setup_device
    unpack_perf_package
    breadcrumbs_on_off main 10 200
    tar -C $logs -czf "$OUT/run16-results.tar.gz" .
}

# Batch 17 (issue 21): breadcrumbs for camera views only. Release realistic_scene + release drill
# layer: breadcrumbs on / off in 12 alternating rounds (marker command buffers per frame printed),
# then the drill's hang-in-pass:main_opaque_pass_3d in that scene on the NVIDIA driver.
build17() {
    (cd bench/realistic_scene && cargo build --release)
    cargo build --release -p gpu_crash_drill_layer
    rm -rf /tmp/pk17 && mkdir -p /tmp/pk17/layer /tmp/pk17-stage
    cp target/release/realistic_scene /tmp/pk17/
    strip /tmp/pk17/realistic_scene
    cp target/release/libgpu_crash_drill_layer.so /tmp/pk17/layer/
    cargo run -q --release -p xtask -- layer-manifest /tmp/pk17-stage
    sed 's#"library_path": "[^"]*"#"library_path": "./libgpu_crash_drill_layer.so"#' \
        /tmp/pk17-stage/VK_LAYER_gpu_crash_drill.json > /tmp/pk17/layer/VK_LAYER_gpu_crash_drill.json
    pack_devrun /tmp/pk17 scene17
}
device17() {
    setup_device
    unpack_devrun scene17 /tmp/p
    local t0 r
    echo "== (1) drill hang-in-pass:main_opaque_pass_3d in the realistic scene"
    t0=$(date +%s)
    VK_LAYER_PATH=/tmp/p/layer VK_INSTANCE_LAYERS=VK_LAYER_gpu_crash_drill \
        GPU_CRASH_DRILL=hang-in-pass:main_opaque_pass_3d GPU_CRASH_DRILL_AFTER=200 \
        GPU_CRASH_REPORT_DIR=$logs/drill-reports timeout -s KILL 50 /tmp/p/realistic_scene \
        --frames 100000 --warmup 20 > $logs/drill.out 2> $logs/drill.err
    echo "drill rc=$? after $(( $(date +%s) - t0 )) s"
    grep -E "gpu_crash_drill\]" $logs/drill.err | cut -c1-300 | head -5
    for r in $logs/drill-reports/*.json; do
        [ -f "$r" ] || continue
        grep -oE '"(kind|summary|gpu_stage)": *"[^"]*"' "$r" | cut -c1-300
        grep -oE '"label": *"[^"]*", *"camera": *("[^"]*"|null), *"state": *"[^"]*"' "$r" | head -12
    done
    echo "== (2) breadcrumbs off (3) / on (1), 12 rounds"
    t0=$(date +%s)
    timeout -s KILL 420 /tmp/p/realistic_scene --compare --configs 3,1 --rounds 12 --frames 150 \
        --warmup 30 > $logs/scene.out 2> $logs/scene.err
    echo "scene rc=$? after $(( $(date +%s) - t0 )) s"
    grep -E "ratio|summary" $logs/scene.out | cut -c1-600
    grep -E "panicked|DeviceLost|GPU hang" $logs/scene.err | head -3
    tar -C $logs -czf "$OUT/run17-results.tar.gz" .
}

# Batch 18 (issue 25): the plugin's cost under buffer churn split at the driver's floor, and the
# ring against crossbeam in five runs.
build18() {
    cargo build --release --example frame_overhead
    local bench; bench=$(cargo bench --bench binding_ring --no-run 2>&1 | grep -o 'target/release/deps/binding_ring-[0-9a-f]*' | head -1)
    rm -rf /tmp/pk18 && mkdir -p /tmp/pk18
    cp target/release/examples/frame_overhead /tmp/pk18/
    cp "$bench" /tmp/pk18/binding_ring
    strip /tmp/pk18/frame_overhead /tmp/pk18/binding_ring
    pack_devrun /tmp/pk18 churn18
}
device18() {
    setup_device
    unpack_devrun churn18 /tmp/p18
    local t0 i
    echo "== (1) ring vs crossbeam, 1 and 2 producers, 5 runs"
    for i in 1 2 3 4 5; do
        (cd /tmp/p18 && ./binding_ring --bench --noplot 'this_crate/|crossbeam' > $logs/ring-$i.out 2>&1)
        grep -E "^binding_ring/|time:" $logs/ring-$i.out | paste - - | sed 's/  */ /g' | cut -c1-160
    done
    echo "== (2) churn: no plugin / capture off / floor / everything on, 7 rounds"
    t0=$(date +%s)
    timeout -s KILL 400 /tmp/p18/frame_overhead --compare --configs 0,2,4,1 --rounds 7 --frames 300 \
        --warmup 60 > $logs/churn.out 2> $logs/churn.err
    echo "churn rc=$? after $(( $(date +%s) - t0 )) s"
    grep -vE "^  frame_overhead plugin" $logs/churn.out | cut -c1-500
    grep -E "panicked|DeviceLost|GPU hang" $logs/churn.err | head -3
    tar -C $logs -czf "$OUT/run18-results.tar.gz" .
}

# Batch 19 (issue 25): where "ours" goes under churn: a flat perf profile (no call graphs: DWARF
# reports did not finish on the host) of frame_overhead everything on and at the floor.
build19() {
    cargo build --release --example frame_overhead
    rm -rf /tmp/pk19 && mkdir -p /tmp/pk19
    cp target/release/examples/frame_overhead /tmp/pk19/
    stage_perf /tmp/pk19
    pack_devrun /tmp/pk19 perf19
}
device19() {
    setup_device
    unpack_devrun perf19 /tmp/p19
    echo -1 > /proc/sys/kernel/perf_event_paranoid 2>/dev/null
    local c a
    for c in floor all; do
        a=""; [ $c = floor ] && a=--floor
        (cd /tmp/p19 && LD_LIBRARY_PATH=/tmp/p19/lib timeout 120 ./perf record -F 1999 -o $c.data \
            -- ./frame_overhead --frames 600 --warmup 60 $a > $logs/$c.out 2> $logs/$c.err)
        echo "perf $c rc=$?"; grep "frame_overhead plugin" $logs/$c.out | cut -c1-200
        (cd /tmp/p19 && LD_LIBRARY_PATH=/tmp/p19/lib timeout 100 ./perf report -i $c.data --stdio \
            --sort comm,dso --percent-limit 0.5 > $logs/$c.comm-dso.txt 2>/dev/null)
        (cd /tmp/p19 && LD_LIBRARY_PATH=/tmp/p19/lib timeout 100 ./perf report -i $c.data --stdio \
            --sort comm,dso,symbol --percent-limit 0.4 > $logs/$c.symbols.txt 2>/dev/null)
        echo "-- $c: threads and libraries"; grep -E "^ +[0-9]" $logs/$c.comm-dso.txt | head -25 | cut -c1-150
        echo "-- $c: symbols"; grep -E "^ +[0-9]" $logs/$c.symbols.txt | head -40 | cut -c1-170
    done
    tar -C $logs -czf "$OUT/run19-results.tar.gz" .
}

# Batch 20 (issue 25): ours split in two under churn (callback and ring: floor -> no fold; the index:
# no fold -> everything on), and the ring's push alone against crossbeam (batch 18 filtered it out).
build20() {
    cargo build --release --example frame_overhead
    local bench; bench=$(cargo bench --bench binding_ring --no-run 2>&1 | grep -o 'target/release/deps/binding_ring-[0-9a-f]*' | head -1)
    rm -rf /tmp/pk20 && mkdir -p /tmp/pk20
    cp target/release/examples/frame_overhead /tmp/pk20/
    cp "$bench" /tmp/pk20/binding_ring
    strip /tmp/pk20/frame_overhead /tmp/pk20/binding_ring
    pack_devrun /tmp/pk20 churn20
}
device20() {
    setup_device
    unpack_devrun churn20 /tmp/p20
    local t0 i
    echo "== (1) churn: no plugin / capture off / floor / no fold / everything on, 7 rounds"
    t0=$(date +%s)
    timeout -s KILL 500 /tmp/p20/frame_overhead --compare --configs 0,2,4,5,1 --rounds 7 --frames 300 \
        --warmup 60 > $logs/churn.out 2> $logs/churn.err
    echo "churn rc=$? after $(( $(date +%s) - t0 )) s"
    grep -vE "^  frame_overhead plugin" $logs/churn.out | cut -c1-500
    grep -E "panicked|DeviceLost|GPU hang" $logs/churn.err | head -3
    echo "== (1b) control: the same with a 4,096-record ring (512 KiB, stays in cache) instead of 32,768 (4 MiB)"
    t0=$(date +%s)
    FRAME_OVERHEAD_RING=4096 timeout -s KILL 300 /tmp/p20/frame_overhead --compare --configs 4,5,1 --rounds 7 \
        --frames 300 --warmup 60 > $logs/churn-ring4096.out 2> $logs/churn-ring4096.err
    echo "churn-ring4096 rc=$? after $(( $(date +%s) - t0 )) s"
    grep -vE "^  frame_overhead plugin" $logs/churn-ring4096.out | cut -c1-500
    echo "== (2) ring vs crossbeam (whole callback, push only), 1 and 2 producers, 5 runs"
    ring_bench_five /tmp/p20 100
    tar -C $logs -czf "$OUT/run20-results.tar.gz" .
}

# Batch 21 (issue 25): batch 20's churn runs on the H100 host were bimodal (about 3.5 ms and 5 ms a
# frame, whatever the configuration), which swamps a 3% share; the same split with every process
# pinned to cores 0-7 (taskset), 9 rounds, to see whether the modes were the scheduler's placement.
device21() {
    setup_device
    unpack_devrun churn20 /tmp/p21
    local t0
    echo "== churn, pinned to cores 0-7: floor / no fold / everything on, 9 rounds"
    t0=$(date +%s)
    taskset -c 0-7 timeout -s KILL 400 /tmp/p21/frame_overhead --compare --configs 4,5,1 --rounds 9 \
        --frames 300 --warmup 60 > $logs/churn-pinned.out 2> $logs/churn-pinned.err
    echo "churn-pinned rc=$? after $(( $(date +%s) - t0 )) s"
    grep -vE "^  frame_overhead plugin" $logs/churn-pinned.out | cut -c1-500
    grep -E "^  frame_overhead plugin" $logs/churn-pinned.out | awk '{print $2, $4, $5, $6}'
    tar -C $logs -czf "$OUT/run21-results.tar.gz" .
}

# Batch 22 (issues 22 and 25). (1) Asset naming on the NVIDIA driver: tests/asset_naming.rs's level
# (its child, release build) under the drill layer, aimed at vertex 5 of a mesh inside a shared
# slab and at 4 KiB into a texture (NVIDIA reports images over their whole memory block: the layer
# and the reporter place the image by its allocation). (2) Issue 25's four configurations under
# churn, pinned to cores 0-7, 7 rounds. (3) realistic_scene with the asset map on and off
# (configs 1, 6), with and without mesh churn, pinned, 7 rounds each.
build22() {
    cargo build --release --example frame_overhead && cargo build --release -p gpu_crash_drill_layer
    local child; child=$(cargo test --release --test asset_naming --no-run 2>&1 \
        | grep -o 'target/release/deps/asset_naming-[0-9a-f]*' | head -1)
    (cd bench/realistic_scene && cargo build --release)
    rm -rf /tmp/pk22 && mkdir -p /tmp/pk22/layer
    cp target/release/examples/frame_overhead target/release/realistic_scene /tmp/pk22/
    cp "$child" /tmp/pk22/asset_naming
    cp -r tests/assets /tmp/pk22/assets
    cp target/release/libgpu_crash_drill_layer.so /tmp/pk22/layer/
    cargo run -q --release -p xtask -- layer-manifest /tmp/gv-stage/layer22
    sed 's#"library_path": "[^"]*"#"library_path": "./libgpu_crash_drill_layer.so"#' \
        /tmp/gv-stage/layer22/VK_LAYER_gpu_crash_drill.json > /tmp/pk22/layer/VK_LAYER_gpu_crash_drill.json
    strip /tmp/pk22/frame_overhead /tmp/pk22/realistic_scene /tmp/pk22/asset_naming \
        /tmp/pk22/layer/libgpu_crash_drill_layer.so
    pack_devrun /tmp/pk22 assets22
}
device22() {
    setup_device
    unpack_devrun assets22 /tmp/p22
    local c t0
    echo "== (1) asset naming under the drill on the NVIDIA driver"
    for c in tree-vertex:in-bounds tree-index:in-bounds image:in-bounds:terrain_grass@4096; do
        local case=${c%%:*} scenario=${c#*:}
        asset_naming_case /tmp/p22 $case $scenario $case
        grep -hE "TRUTH|gpu_crash_drill\] (injected|GPU_CRASH)|^GPU fault" $logs/an-$case.out $logs/an-$case.err | cut -c1-300
        cp /tmp/an-$case/reports/*.json $logs/ 2>/dev/null
    done
    echo "== (2) issue 25: no plugin / capture off / floor / everything on, churn, pinned, 7 rounds"
    t0=$(date +%s)
    taskset -c 0-7 timeout -s KILL 330 /tmp/p22/frame_overhead --compare --configs 0,2,4,1 --rounds 7 \
        --frames 300 --warmup 60 > $logs/churn.out 2> $logs/churn.err
    echo "churn rc=$? after $(( $(date +%s) - t0 )) s"
    grep -vE "^  frame_overhead plugin" $logs/churn.out | cut -c1-500
    tar -C $logs -czf "$OUT/run22-results.tar.gz" .
}
device22b() {
    setup_device
    unpack_devrun assets22 /tmp/p22
    local churn t0
    for churn in 20 0; do
        echo "== (3) realistic_scene asset map on / off, churn $churn, pinned, 7 rounds"
        t0=$(date +%s)
        taskset -c 0-7 timeout -s KILL 270 /tmp/p22/realistic_scene --compare --configs 6,1 --rounds 7 \
            --frames 300 --warmup 60 --churn $churn > $logs/scene-churn$churn.out 2> $logs/scene-churn$churn.err
        echo "scene churn $churn rc=$? after $(( $(date +%s) - t0 )) s"
        grep -E "ratio|summary|^realistic_scene " $logs/scene-churn$churn.out | cut -c1-400
        grep -E "realistic_scene_assets" $logs/scene-churn$churn.out | head -2
    done
    tar -C $logs -czf "$OUT/run22b-results.tar.gz" .
}

# Batch 25 (issue 25): the ring's prefetch. On lavapipe the 4 MiB ring cost the thread that creates
# buffers two line misses per push; the producers now prefetch four positions ahead. Built here:
# frame_overhead at HEAD and at BASE (default cc17373, before the prefetch), both with the per-thread
# CPU breakdown, and the ring bench.
build25() {
    local base=${BASE:-cc17373} head; head=$(git rev-parse --short HEAD)
    rm -rf /tmp/pk25 && mkdir -p /tmp/pk25
    cargo build --release --example frame_overhead || return 1
    cp target/release/examples/frame_overhead /tmp/pk25/frame_overhead
    local bench; bench=$(cargo bench --bench binding_ring --no-run 2>&1 \
        | grep -o 'target/release/deps/binding_ring-[0-9a-f]*' | head -1)
    cp "$bench" /tmp/pk25/binding_ring
    # The base's src/ with HEAD's examples (the same measurement, the old ring), built in place.
    # From commit 8e0d0e2 on, the example needs HEAD's src (--interleave): BASE=none skips this.
    if [ "$base" != none ]; then
        git diff --quiet HEAD -- src || { echo "src/ has uncommitted changes"; return 1; }
        local rc=0
        git checkout -q "$base" -- src && cargo build --release --example frame_overhead || rc=$?
        cp target/release/examples/frame_overhead /tmp/pk25/frame_overhead_base
        git checkout -q HEAD -- src && touch src/lib.rs
        [ $rc = 0 ] || return 1
        strip /tmp/pk25/frame_overhead_base
    fi
    strip /tmp/pk25/frame_overhead /tmp/pk25/binding_ring
    echo "head $head base $base" > /tmp/pk25/built.txt
    pack_devrun /tmp/pk25 churn25
}
device25() {
    setup_device
    unpack_devrun churn25 /tmp/p25
    cat /tmp/p25/built.txt | tee -a $logs/env.txt
    local t0 i
    echo "== (1) issue 25: no plugin / capture off / floor / no fold / everything on, churn, pinned, 7 rounds"
    t0=$(date +%s)
    taskset -c 0-7 timeout -s KILL 200 /tmp/p25/frame_overhead --compare --configs 0,2,4,5,1 --rounds 7 \
        --frames 300 --warmup 60 > $logs/churn.out 2> $logs/churn.err
    echo "churn rc=$? after $(( $(date +%s) - t0 )) s"
    grep -vE "^  frame_overhead plugin" $logs/churn.out | cut -c1-600
    echo "== (2) before / after the prefetch / floor, alternating processes, pinned, 9 rounds"
    t0=$(date +%s)
    alternate_before_after /tmp/p25 9
    echo "before-after after $(( $(date +%s) - t0 )) s"
    awk '{for(i=1;i<=NF;i++) if($i ~ /^(mean_us|cpu_us_per_frame|threads_us_per_frame)=/) printf "%s ", $i; print $1}' \
        $logs/before-after.out | cut -c1-300
    echo "== (3) the four configurations again, pinned, 7 rounds"
    t0=$(date +%s)
    taskset -c 0-7 timeout -s KILL 160 /tmp/p25/frame_overhead --compare --configs 0,2,4,1 --rounds 7 \
        --frames 300 --warmup 60 > $logs/churn2.out 2> $logs/churn2.err
    echo "churn2 rc=$? after $(( $(date +%s) - t0 )) s"
    grep -vE "^  frame_overhead plugin" $logs/churn2.out | cut -c1-600
    echo "== (4) the ring against crossbeam, five runs"
    ring_bench_five /tmp/p25 60
    tar -C $logs -czf "$OUT/run25-results.tar.gz" .
}

# Batch 25b: batch 25's host was bimodal (per-round ratios 0.72-1.49), so more rounds of the final
# build: the four configurations 11 rounds, and base / head / floor alternating 15 rounds.
device25b() {
    setup_device
    unpack_devrun churn25 /tmp/p25
    cat /tmp/p25/built.txt | tee -a $logs/env.txt
    local t0 i c
    echo "== (1) no plugin / capture off / floor / everything on, churn, pinned, 11 rounds"
    t0=$(date +%s)
    taskset -c 0-7 timeout -s KILL 250 /tmp/p25/frame_overhead --compare --configs 0,2,4,1 --rounds 11 \
        --frames 300 --warmup 60 > $logs/churn.out 2> $logs/churn.err
    echo "churn rc=$? after $(( $(date +%s) - t0 )) s"
    grep -vE "^  frame_overhead plugin" $logs/churn.out | cut -c1-700
    echo "== (2) before / after the prefetch / floor, alternating processes, pinned, 15 rounds"
    t0=$(date +%s)
    alternate_before_after /tmp/p25 15
    echo "before-after after $(( $(date +%s) - t0 )) s"
    tar -C $logs -czf "$OUT/run25b-results.tar.gz" .
}

# Batch 25c: ours inside one process (frame_overhead --interleave), blocks of 20 frames, and of 10
# and 40 as a control on the block length; pinned as the others.
device25c() {
    setup_device
    unpack_devrun churn25 /tmp/p25
    cat /tmp/p25/built.txt | tee -a $logs/env.txt
    local t0 b
    for b in 20 10 40; do
        echo "== interleaved, blocks of $b frames, 11 processes"
        t0=$(date +%s)
        taskset -c 0-7 timeout -s KILL 150 /tmp/p25/frame_overhead --compare --interleave $b --rounds 11 \
            --frames 600 --warmup 60 > $logs/interleave-$b.out 2> $logs/interleave-$b.err
        echo "interleave $b rc=$? after $(( $(date +%s) - t0 )) s"
        cut -c1-400 $logs/interleave-$b.out
    done
    tar -C $logs -czf "$OUT/run25c-results.tar.gz" .
}

# Batch 26: where the asset_naming child dies of SIGSEGV on NVIDIA after its report (the image case,
# batches 22 and 22c), traced with GPU_CRASH_SEGV_TRACE=1; the unstripped binary stays on dev
# (/tmp/pk26-debug) for addr2line. Then ours inside one process, blocks of 20, on whatever card came.
build26() {
    cargo build --release -p gpu_crash_drill_layer && cargo build --release --example frame_overhead || return 1
    local child; child=$(cargo test --release --test asset_naming --no-run 2>&1 \
        | grep -o 'target/release/deps/asset_naming-[0-9a-f]*' | head -1)
    rm -rf /tmp/pk26 /tmp/pk26-debug && mkdir -p /tmp/pk26/layer /tmp/pk26-debug
    cp "$child" /tmp/pk26/asset_naming && cp "$child" /tmp/pk26-debug/asset_naming
    cp target/release/examples/frame_overhead /tmp/pk26/
    cp target/release/libgpu_crash_drill_layer.so /tmp/pk26/layer/
    cp target/release/libgpu_crash_drill_layer.so /tmp/pk26-debug/
    cp -r tests/assets /tmp/pk26/assets
    cargo run -q --release -p xtask -- layer-manifest /tmp/gv-stage/layer26
    sed 's#"library_path": "[^"]*"#"library_path": "./libgpu_crash_drill_layer.so"#' \
        /tmp/gv-stage/layer26/VK_LAYER_gpu_crash_drill.json > /tmp/pk26/layer/VK_LAYER_gpu_crash_drill.json
    strip /tmp/pk26/frame_overhead /tmp/pk26/asset_naming /tmp/pk26/layer/libgpu_crash_drill_layer.so
    pack_devrun /tmp/pk26 segv26
}
device26() {
    setup_device
    unpack_devrun segv26 /tmp/p26
    local c t0 i
    echo "== (1) the asset_naming child under GPU_CRASH_SEGV_TRACE, image and tree-vertex cases, twice"
    # ONLY_INTERLEAVE=1: part (2) alone (the run for a card that batch 26 did not get).
    for i in $([ -n "${ONLY_INTERLEAVE:-}" ] || echo 1 2); do
    for c in image:in-bounds:terrain_grass@4096 tree-vertex:in-bounds; do
        local case=${c%%:*} scenario=${c#*:}
        GPU_CRASH_SEGV_TRACE=1 asset_naming_case /tmp/p26 $case $scenario $case-$i
        grep -hE "^GPU fault" $logs/an-$case-$i.out $logs/an-$case-$i.err | cut -c1-200
        grep -h -A40 "^SIGSEGV at" $logs/an-$case-$i.err | grep -vE "WARN|INFO" | head -40
        grep -hE "panicked|thread '" $logs/an-$case-$i.err | head -5
    done
    done
    (dmesg 2>&1 | tail -5) || true
    echo "== (2) ours inside one process, blocks of 20 frames, 11 processes"
    t0=$(date +%s)
    taskset -c 0-7 timeout -s KILL 150 /tmp/p26/frame_overhead --compare --interleave 20 --rounds 11 \
        --frames 600 --warmup 60 > $logs/interleave-20.out 2> $logs/interleave-20.err
    echo "interleave 20 rc=$? after $(( $(date +%s) - t0 )) s"
    tail -1 $logs/interleave-20.out | cut -c1-400
    tar -C $logs -czf "$OUT/run26-results.tar.gz" .
}

# Batch 27 (issue 32): trust on the real driver. Debug test binaries (opt-level 1 dependencies; no
# timings are taken), stripped. (1) The drilled main-pass hang in a 3D scene, no simulated loss: the
# driver's own reset comes about 18 s after the hang; one report on disk and one issue at a counting
# Sentry endpoint (scripts/counting-sentry.py), twice. (2) Drilled losses that quit the game: the
# asset_naming child died of SIGSEGV after its report in 4 of 4 runs of batch 26; now N of N must exit
# with Bevy's code 1 and no signal. (3) The shader that never ends (tests/shader_hang.rs), if built.
build27() {
    cargo build -p gpu_crash_drill_layer || return 1
    rm -rf /tmp/pk27 && mkdir -p /tmp/pk27/layer
    local t child
    for t in hang_then_loss asset_naming shader_hang; do
        child=$(cargo test --test $t --no-run 2>&1 | grep -o "target/debug/deps/$t-[0-9a-f]*" | head -1)
        [ -n "$child" ] && cp "$child" /tmp/pk27/$t
    done
    cp target/debug/libgpu_crash_drill_layer.so /tmp/pk27/layer/
    cp -r tests/assets /tmp/pk27/assets
    cargo run -q -p xtask -- layer-manifest /tmp/gv-stage/layer27
    sed 's#"library_path": "[^"]*"#"library_path": "./libgpu_crash_drill_layer.so"#' \
        /tmp/gv-stage/layer27/VK_LAYER_gpu_crash_drill.json > /tmp/pk27/layer/VK_LAYER_gpu_crash_drill.json
    strip /tmp/pk27/hang_then_loss /tmp/pk27/asset_naming /tmp/pk27/layer/libgpu_crash_drill_layer.so
    [ -f /tmp/pk27/shader_hang ] && strip /tmp/pk27/shader_hang
    pack_devrun /tmp/pk27 trust27
}
# There: one run of the shader_hang child in /tmp/p27 (batch 27's package), its log and report kept.
shader_hang_case() {
    local i=$1 t0
    rm -rf /tmp/sh-$i && t0=$(date +%s)
    (cd /tmp/p27 && env SHADER_HANG_ASSETS=/tmp/p27/assets GPU_CRASH_REPORT_DIR=/tmp/sh-$i/reports \
        timeout -s KILL 60 ./shader_hang --exact child --ignored --nocapture \
        > $logs/sh-$i.out 2> $logs/sh-$i.err)
    echo "shader hang $i rc=$? after $(( $(date +%s) - t0 )) s"
    grep -hE "GPU hang in|report written|shader child" $logs/sh-$i.err $logs/sh-$i.out | cut -c1-260 | head -6
    cp -r /tmp/sh-$i/reports $logs/sh-$i-reports 2>/dev/null
}
device27() {
    setup_device
    unpack_devrun trust27 /tmp/p27
    local i c t0 port=38117 sentry=/tmp/p27/sentry
    python3 scripts/counting-sentry.py serve $port $sentry &
    local server=$!
    sleep 1
    echo "== (1) hang-in-pass:main_opaque_pass_3d in a 3D scene, the driver's own loss, twice"
    for i in 1 2; do
        rm -rf /tmp/htl-$i && t0=$(date +%s)
        (cd /tmp/p27 && env GPU_CRASH_DRILL=hang-in-pass:main_opaque_pass_3d GPU_CRASH_DRILL_AFTER=40 \
            GPU_CRASH_REPORT_DIR=/tmp/htl-$i/reports SENTRY_DSN=http://public@127.0.0.1:$port/$i \
            VK_LAYER_PATH=/tmp/p27/layer VK_INSTANCE_LAYERS=VK_LAYER_gpu_crash_drill \
            timeout -s KILL 100 ./hang_then_loss --exact child --ignored --nocapture \
            > $logs/htl-$i.out 2> $logs/htl-$i.err)
        echo "hang then loss $i rc=$? after $(( $(date +%s) - t0 )) s; reports: $(ls /tmp/htl-$i/reports/*.json 2>/dev/null | wc -l)"
        grep -hE "injected|GPU hang in|^GPU fault|report written|follows its hang|ending the process|DeviceLost|device lost" \
            $logs/htl-$i.err | cut -c1-260 | head -12
        for f in /tmp/htl-$i/reports/*.json; do
            python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['kind'], 'follows_hang' if r.get('follows_hang') else 'alone', r.get('follows_hang'), '|', r['summary'][:220])" "$f"
        done
        cp -r /tmp/htl-$i/reports $logs/htl-$i-reports 2>/dev/null
    done
    python3 scripts/counting-sentry.py issues $sentry | tee $logs/sentry-issues.txt
    cp $sentry/events.jsonl $logs/ 2>/dev/null
    echo "== (2) drilled losses that quit the game: exit code and signal, 6 runs"
    for i in 1 2 3; do
        for c in image:in-bounds:terrain_grass@4096 tree-vertex:in-bounds; do
            local case=${c%%:*} scenario=${c#*:}
            asset_naming_case /tmp/p27 $case $scenario $case-$i
            grep -hE "^GPU fault|ending the process" $logs/an-$case-$i.out $logs/an-$case-$i.err | cut -c1-200
        done
    done
    if [ -x /tmp/p27/shader_hang ]; then
        echo "== (3) a shader that never ends (no drill)"
        for i in 1 2; do shader_hang_case $i; done
    fi
    kill $server 2>/dev/null
    (dmesg 2>&1 | grep -i xid | tail -5) || true
    tar -C $logs -czf "$OUT/run27-results.tar.gz" .
}

# Batch 27b: the shader that never ends again, twice, each after 40 s with no GPU work: in batch 27
# the second run started while the first run's endless shader still held the GPU (the driver resets
# it only later), and reported a hang in its own frame 1.
device27b() {
    setup_device
    unpack_devrun trust27 /tmp/p27
    local i
    for i in 1 2; do
        sleep 40
        shader_hang_case $i
    done
    (dmesg 2>&1 | grep -i xid | tail -5) || true
    tar -C $logs -czf "$OUT/run27b-results.tar.gz" .
}

# Build for batch 28 (issue 36): the realistic scene built from two trees, the commit before the core
# split (SCENE_BEFORE_TREE, a worktree of it, built with its own target dir) and this tree, both
# release and stripped, into .devrun/scene28.tar.xz.
#   SCENE_BEFORE_TREE=/work/wt-before CARGO_TARGET_DIR=/work/wt-before/target \
#       bash scripts/gpu-validation.sh build28      (one target dir: Bevy's release build shared)
build28() {
    local before=${SCENE_BEFORE_TREE:?SCENE_BEFORE_TREE: a worktree of the commit before}
    local before_target=${SCENE_BEFORE_TARGET:-$before/target}
    local target=${CARGO_TARGET_DIR:-$ROOT/target}
    mkdir -p .devrun /tmp/gv-stage28 && rm -f .devrun/scene28.tar.xz
    # Copied at once: the two builds may share one target dir (Bevy compiled once).
    (cd "$before/bench/realistic_scene" && CARGO_TARGET_DIR=$before_target nice -n 10 cargo build --release)
    cp "$before_target/release/realistic_scene" /tmp/gv-stage28/scene_before
    (cd bench/realistic_scene && CARGO_TARGET_DIR=$target nice -n 10 cargo build --release)
    cp "$target/release/realistic_scene" /tmp/gv-stage28/scene_after
    strip /tmp/gv-stage28/scene_before /tmp/gv-stage28/scene_after
    tar -C /tmp/gv-stage28 -cf - scene_before scene_after | xz -T0 -6 > .devrun/scene28.tar.xz
    { git -C "$before" describe --always --dirty --abbrev=12; git describe --always --dirty --abbrev=12; } \
        > .devrun/scene28.commit
    ls -la .devrun
}

# Batch 28: the plugin (everything on) in the realistic scene before and after the core split,
# alternating processes, the order flipped every round (ABBA), plus the scene without the plugin
# (this tree's binary) as the floor; SCENE_ROUNDS rounds (default 8), each run's mean frame kept.
device28() {
    setup_device
    tar -C $bin -xJf .devrun/scene28.tar.xz
    echo "scene commits (before, after): $(tr '\n' ' ' < .devrun/scene28.commit)" | tee -a $logs/env.txt
    local rounds=${SCENE_ROUNDS:-8} frames=${SCENE_FRAMES:-600} warmup=${SCENE_WARMUP:-120}
    local r which order
    for r in $(seq 1 "$rounds"); do
        if [ $((r % 2)) -eq 1 ]; then order="before after floor"; else order="after before floor"; fi
        for which in $order; do
            local exe=$bin/scene_$which args=""
            [ "$which" = floor ] && { exe=$bin/scene_after; args="--no-plugin"; }
            timeout -s KILL 120 "$exe" $args --frames "$frames" --warmup "$warmup" \
                > "$logs/r$r-$which.out" 2> "$logs/r$r-$which.err"
            echo "round $r $which rc=$? $(grep -o 'mean_us=[0-9.]*' "$logs/r$r-$which.out") $(grep -o 'median_us=[0-9.]*' "$logs/r$r-$which.out")"
        done
    done
    tar -C $logs -czf "$OUT/run28-results.tar.gz" .
}

# Build for batch 29 (issue 35): this tree's frame_overhead (release) and the ring bench, into
# .devrun/b29.tar.xz. CARGO_TARGET_DIR may be batch 28's (Bevy's release build shared).
build29() {
    local target=${CARGO_TARGET_DIR:-$ROOT/target}
    nice -n 10 cargo build --release --example frame_overhead || return 1
    local bench
    bench=$(nice -n 10 cargo bench --no-run --bench binding_ring 2>&1 \
        | grep -o 'target/release/deps/binding_ring-[0-9a-f]*\|/[^ ]*/release/deps/binding_ring-[0-9a-f]*' | tail -1)
    rm -rf /tmp/gv-stage29 && mkdir -p .devrun /tmp/gv-stage29
    cp "$target/release/examples/frame_overhead" /tmp/gv-stage29/
    cp "$bench" /tmp/gv-stage29/binding_ring
    strip /tmp/gv-stage29/*
    tar -C /tmp/gv-stage29 -cf - frame_overhead binding_ring | xz -T0 -6 > .devrun/b29.tar.xz
    git describe --always --dirty --abbrev=12 > .devrun/b29.commit
    ls -la .devrun
}

# Batch 29: the ring's push against crossbeam's ArrayQueue at 2 and 4 producers, 7 rounds of single
# processes, the order swapped each round; then ours inside one process (frame_overhead
# --interleave 20) under 1,000 buffers a frame, 7 processes.
device29() {
    setup_device
    tar -C $bin -xJf .devrun/b29.tar.xz
    echo "commit $(cat .devrun/b29.commit); $(nproc) cores" | tee -a $logs/env.txt
    local r q order t0
    for r in $(seq 1 7); do
        if [ $((r % 2)) -eq 1 ]; then order="this_crate_push_only crossbeam_array_queue"
        else order="crossbeam_array_queue this_crate_push_only"; fi
        for q in $order; do
            (cd /tmp && timeout -s KILL 60 $bin/binding_ring --bench --noplot "^binding_ring/$q/(2|4)\$" \
                > $logs/ring-r$r-$q.out 2> $logs/ring-r$r-$q.err)
            echo "ring round $r $q: $(grep -E "^binding_ring/|time:" $logs/ring-r$r-$q.out | paste - - \
                | sed 's/  */ /g' | cut -c1-160 | tr '\n' ';')"
        done
    done
    echo "== interleaved, blocks of 20 frames, 7 processes"
    t0=$(date +%s)
    timeout -s KILL 240 $bin/frame_overhead --compare --interleave 20 --rounds 7 \
        --frames 600 --warmup 60 > $logs/interleave.out 2> $logs/interleave.err
    echo "interleave rc=$? after $(( $(date +%s) - t0 )) s"
    cut -c1-400 $logs/interleave.out | tail -20
    tar -C $logs -czf "$OUT/run29-results.tar.gz" .
}

# The realistic scene with the plugin's `pbr` feature (scene_named), and the shader_hang test binary
# with its assets, built from $1 into target dir $2 and copied into stage $3.
stage_scene_and_hang() {
    local src=$1 target=$2 stage=$3 child
    (cd "$src/bench/realistic_scene" && CARGO_TARGET_DIR=$target nice -n 10 cargo build --release) || return 1
    cp "$target/release/realistic_scene" $stage/scene_named
    child=$(cd "$src" && CARGO_TARGET_DIR=$target nice -n 10 cargo test --release --test shader_hang --no-run 2>&1 \
        | grep -o '/[^ ]*/release/deps/shader_hang-[0-9a-f]*' | tail -1)
    cp "$child" $stage/shader_hang
    cp -r "$src/tests/assets" $stage/assets
}

# Build for batches 29 and 30 (issues 35 and 33), from GV_SRC (a `git archive` copy, so edits in
# progress here do not leak in) with one release target: the realistic scene with and without the
# plugin's `pbr` feature (`pipeline_names`), the shader_hang test binary and its assets
# (.devrun/b30.tar.xz); frame_overhead and the ring bench (.devrun/b29.tar.xz).
build30() {
    local src=${GV_SRC:-$ROOT}
    local target=${CARGO_TARGET_DIR:-$src/target}
    local stage=/tmp/gv-stage30 bench
    rm -rf $stage /tmp/gv-stage29 && mkdir -p .devrun $stage /tmp/gv-stage29
    (cd "$src/bench/realistic_scene" && CARGO_TARGET_DIR=$target nice -n 10 cargo build --release \
        --no-default-features) || return 1
    cp "$target/release/realistic_scene" $stage/scene_unnamed
    stage_scene_and_hang "$src" "$target" $stage || return 1
    (cd "$src" && CARGO_TARGET_DIR=$target nice -n 10 cargo build --release --example frame_overhead) || return 1
    bench=$(cd "$src" && CARGO_TARGET_DIR=$target nice -n 10 cargo bench --no-run --bench binding_ring 2>&1 \
        | grep -o '/[^ ]*/release/deps/binding_ring-[0-9a-f]*' | tail -1)
    cp "$target/release/examples/frame_overhead" /tmp/gv-stage29/
    cp "$bench" /tmp/gv-stage29/binding_ring
    strip $stage/scene_* $stage/shader_hang /tmp/gv-stage29/*
    tar -C $stage -cf - . | xz -T0 -6 > .devrun/b30.tar.xz
    tar -C /tmp/gv-stage29 -cf - frame_overhead binding_ring | xz -T0 -6 > .devrun/b29.tar.xz
    git -C "$src" describe --always --dirty --abbrev=12 2>/dev/null > .devrun/b30.commit \
        || git rev-parse --short=12 HEAD > .devrun/b30.commit
    cp .devrun/b30.commit .devrun/b29.commit
    ls -la .devrun
}

# Batch 42: the endless shader's real hang on the real driver, then the realistic scene started in the
# same report folder while the GPU is still busy with it (on the H100 host it stayed busy 8+ minutes):
# the scene's frame-1 hang report must name the shader's report and take its issue fingerprint.
build42() {
    local src=${GV_SRC:-$ROOT}
    local target=${CARGO_TARGET_DIR:-$src/target}
    local stage=/tmp/gv-stage42
    rm -rf $stage && mkdir -p .devrun $stage
    stage_scene_and_hang "$src" "$target" $stage || return 1
    strip $stage/scene_named $stage/shader_hang
    tar -C $stage -cf - . | xz -T0 -6 > .devrun/b42.tar.xz
    git -C "$src" describe --always --dirty --abbrev=12 > .devrun/b42.commit
    ls -la .devrun/b42.*
}

device42() {
    setup_device
    tar -C $bin -xJf .devrun/b42.tar.xz
    echo "commit $(cat .devrun/b42.commit)" | tee -a $logs/env.txt
    cp $logs/env.txt "$OUT/"
    local dir=$logs/reports r
    mkdir -p $dir
    (cd $bin && SHADER_HANG_ASSETS=$bin/assets GPU_CRASH_REPORT_DIR=$dir \
        timeout -s KILL 90 ./shader_hang --exact child --ignored --nocapture \
        > $logs/sh.out 2> $logs/sh.err)
    echo "shader_hang rc=$? $(date -u +%T)" | tee -a "$OUT/relaunch.txt"
    for r in 1 2; do
        GPU_CRASH_REPORT_DIR=$dir timeout -s KILL 60 $bin/scene_named --frames 150 --warmup 30 \
            > $logs/scene$r.out 2> $logs/scene$r.err
        echo "scene $r rc=$? $(date -u +%T) $(grep -c 'GPU hang' $logs/scene$r.err) hang lines" | tee -a "$OUT/relaunch.txt"
    done
    for f in $dir/*.json; do
        python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["id"], r["kind"], r["application"]["process_id"]); print(" ", r["summary"][:600]); print("  after_earlier_hang:", json.dumps(r.get("after_earlier_hang"))); print("  running:", "none" if r.get("running") is None else len(r["running"]["candidates"]))' "$f" | tee -a "$OUT/relaunch.txt"
    done
    tar -C $logs -czf "$OUT/run42-results.tar.gz" .
}

# Sets the device up and unpacks batch $1's package (.devrun/b$1.tar.xz) into $bin, noting its commit
# and the core count in $logs/env.txt and $OUT/env.txt.
unpack_batch() {
    setup_device
    tar -C $bin -xJf .devrun/b$1.tar.xz
    echo "commit $(cat .devrun/b$1.commit); $(nproc) cores" | tee -a $logs/env.txt
    cp $logs/env.txt "$OUT/"
}

# frame_overhead and the indexer_fold bench of this tree, and the indexer_fold bench of a base tree
# ($2, a binary built there), packed into .devrun/b$1.tar.xz with the tree's commit in .devrun/b$1.commit.
build_fold_package() {
    local batch=$1 base=$2
    local src=${GV_SRC:-$ROOT}
    local target=${CARGO_TARGET_DIR:-$src/target}
    local stage=/tmp/gv-stage$batch bench
    rm -rf $stage && mkdir -p .devrun $stage
    (cd "$src" && CARGO_TARGET_DIR=$target nice -n 10 cargo build --release --example frame_overhead) || return 1
    bench=$(cd "$src" && CARGO_TARGET_DIR=$target nice -n 10 cargo bench --no-run --bench indexer_fold 2>&1 \
        | grep -o '/[^ ]*/release/deps/indexer_fold-[0-9a-f]*' | tail -1)
    cp "$target/release/examples/frame_overhead" "$bench" $stage/
    mv $stage/indexer_fold-* $stage/fold_now
    cp "$base" $stage/fold_base
    strip $stage/*
    tar -C $stage -cf - . | xz -T0 -6 > .devrun/b$batch.tar.xz
    git -C "$src" describe --always --dirty --abbrev=12 > .devrun/b$batch.commit
    ls -la .devrun/b$batch.*
}

# Batch 44 (issue 35): frame_overhead and the indexer_fold bench of this tree (the fold in place in
# the ring, fewer instructions an event), and the indexer_fold bench of the tree before
# (FOLD44_BASE, a binary built there), packed into .devrun/b44.tar.xz.
build44() {
    build_fold_package 44 "${FOLD44_BASE:?the indexer_fold binary of the base tree}"
}

# Ours inside one process on all 16 cores at 1,000 buffers a frame (frame_overhead --interleave 20),
# 7 processes, each line copied to $OUT/interleave.txt as it comes.
sixteen_core_rows() {
    local r
    for r in $(seq 1 7); do
        timeout -s KILL 60 $bin/frame_overhead --interleave 20 --frames 600 --warmup 60 \
            > $logs/il16-$r.out 2> $logs/il16-$r.err
        echo "16 cores process $r rc=$? $(grep -o 'frame_overhead_interleave.*' $logs/il16-$r.out)" \
            | tee -a "$OUT/interleave.txt"
    done
}

# One frame_overhead process pinned to 2 cores (taskset -c 0,1), ours inside one process
# (--interleave 20), round $1, configuration $2, with the environment assignment $3; its line copied to
# $OUT/interleave.txt.
two_core_process() {
    local r=$1 which=$2
    env $3 taskset -c 0,1 timeout -s KILL 60 $bin/frame_overhead --interleave 20 --frames 600 \
        --warmup 60 > $logs/il2-$r-$which.out 2> $logs/il2-$r-$which.err
    echo "2 cores round $r $which rc=$? $(grep -o 'frame_overhead_interleave.*' $logs/il2-$r-$which.out)" \
        | tee -a "$OUT/interleave.txt"
}

# Batch 44: the indexer_fold bench's 4-frame drain now and before (7 rounds, order swapped); ours
# inside one process under 1,000 buffers a frame (frame_overhead --interleave 20, 7 processes) on
# all 16 cores; then pinned to 2 cores (taskset -c 0,1), everything on and the callback-and-ring
# control (GPU_CRASH_REPORTER_COST_NO_FOLD) alternated, 7 each. Each line copied to $OUT as it comes.
device44() {
    unpack_batch 44
    local r order which env
    fold_rounds 'churn_1000_buffers_4_frames_a_drain$'
    sixteen_core_rows
    for r in $(seq 1 7); do
        if [ $((r % 2)) -eq 1 ]; then order="on nofold"; else order="nofold on"; fi
        for which in $order; do
            env=X44=1; [ $which = nofold ] && env=GPU_CRASH_REPORTER_COST_NO_FOLD=1
            two_core_process $r $which $env
        done
    done
    tar -C $logs -czf "$OUT/run44-results.tar.gz" .
}

# A bench of the base tree and of this one ($bin/$1_base, $bin/$1_now), 7 rounds, the order swapped
# each round, the benches matching $2 (all when empty); each first time line copied to $OUT/$1.txt as
# it comes.
bench_rounds() {
    local r b order
    for r in $(seq 1 7); do
        if [ $((r % 2)) -eq 1 ]; then order="$1_base $1_now"; else order="$1_now $1_base"; fi
        for b in $order; do
            bench_run $1 $r $b "$2"
        done
    done
}

# One criterion run of bench binary $bin/$3 (of bench $1, round $2) matching $4; its time line
# copied to $OUT/$1.txt.
bench_run() {
    (cd /tmp && timeout -s KILL 30 $bin/$3 --bench --noplot --warm-up-time 1 --measurement-time 3 \
        ${4:+"$4"} > $logs/$1-$2-$3.out 2> $logs/$1-$2-$3.err)
    echo "$1 round $2 $3 rc=$? $(grep -m1 'time:' $logs/$1-$2-$3.out | sed 's/  */ /g')" \
        | tee -a "$OUT/$1.txt"
}

# Ours inside one process pinned to 2 cores, frame_base and frame_now alternated, 7 rounds, the
# order swapped each round; $1 tags the environment (an assignment no program reads).
two_core_base_and_now() {
    local r order b
    for r in $(seq 1 7); do
        if [ $((r % 2)) -eq 1 ]; then order="base now"; else order="now base"; fi
        for b in $order; do
            ln -sf frame_$b $bin/frame_overhead
            two_core_process $r $b $1
        done
    done
}

# The indexer_fold bench of the base tree and of this one ($bin/fold_base, $bin/fold_now), matching $1.
fold_rounds() {
    bench_rounds fold "$1"
}

# The order of round $1 among the three configurations $2 $3 $4, rotated each round.
rotation() {
    case $(($1 % 3)) in
        1) echo "$2 $3 $4" ;;
        2) echo "$3 $4 $2" ;;
        *) echo "$4 $2 $3" ;;
    esac
}

# The scaling rows: ours inside one process at 100 and 10,000 buffers a frame, 5 processes each, each
# line copied to $OUT/churn.txt as it comes.
churn_rows() {
    local n r
    for n in 100 10000; do
        for r in $(seq 1 5); do
            timeout -s KILL 60 $bin/frame_overhead --interleave 20 --churn $n --frames 300 --warmup 30 \
                > $logs/churn-$n-$r.out 2> $logs/churn-$n-$r.err
            echo "churn $n process $r rc=$? $(grep -o 'frame_overhead_interleave.*' $logs/churn-$n-$r.out)" \
                | tee -a "$OUT/churn.txt"
        done
    done
}

# Batch 46 (issue 35): where the fold's share of a 2-core frame goes. Pinned to 2 cores (taskset -c
# 0,1), ours inside one process (frame_overhead --interleave 20) with the index at its defaults, with
# its tables a sixteenth of them (FRAME_OVERHEAD_SMALL_INDEX=1) and with no fold
# (GPU_CRASH_REPORTER_COST_NO_FOLD=1), 7 rounds, the order rotated each round (build44's package).
device46() {
    unpack_batch 44
    local r which order env
    for r in $(seq 1 7); do
        order=$(rotation $r default small nofold)
        for which in $order; do
            env=X46=1
            [ $which = small ] && env=FRAME_OVERHEAD_SMALL_INDEX=1
            [ $which = nofold ] && env=GPU_CRASH_REPORTER_COST_NO_FOLD=1
            two_core_process $r $which $env
        done
    done
}

# Batch 45 (issue 35): batch 44 on the tree with the name-table prefetch (build44 again), then the
# scaling rows: ours inside one process at 100 and 10,000 buffers a frame, 5 processes each.
device45() {
    device44
    churn_rows
    tar -C $logs -czf "$OUT/run45-results.tar.gz" .
}

# This tree's frame_overhead into $1 (emptied first) as frame_now, and each bench named in $2...
# (short:bench, e.g. fold:indexer_fold) as <short>_now.
stage_frame_and_benches() {
    local stage=$1 pair bench
    shift
    local src=${GV_SRC:-$ROOT}
    local target=${CARGO_TARGET_DIR:-$src/target}
    rm -rf $stage && mkdir -p .devrun $stage
    (cd "$src" && CARGO_TARGET_DIR=$target nice -n 10 cargo build --release --example frame_overhead) || return 1
    cp "$target/release/examples/frame_overhead" $stage/frame_now
    for pair in "$@"; do
        bench=$(cd "$src" && CARGO_TARGET_DIR=$target nice -n 10 cargo bench --no-run --bench ${pair#*:} 2>&1 \
            | grep -o "/[^ ]*/release/deps/${pair#*:}-[0-9a-f]*" | tail -1)
        cp "$bench" $stage/${pair%%:*}_now
    done
}

# Strips what $2 holds and packs it into .devrun/b$1.tar.xz, with the tree's commit in .devrun/b$1.commit.
pack_stage() {
    local src=${GV_SRC:-$ROOT}
    strip $2/*
    tar -C $2 -cf - . | xz -T0 -6 > .devrun/b$1.tar.xz
    git -C "$src" describe --always --dirty --abbrev=12 > .devrun/b$1.commit
    ls -la .devrun/b$1.*
}

# Batch 47 (issue 35): frame_overhead and the binding_ring and indexer_fold benches of this tree
# (the callback writing its event into the ring slot in place, the object table sized to its
# objects) and of a base tree (BASE47: a folder holding them as frame_base, ring_base and
# fold_base), packed into .devrun/b47.tar.xz.
build47() {
    local base=${BASE47:?a folder with frame_base, ring_base and fold_base of the base tree}
    local stage=/tmp/gv-stage47
    stage_frame_and_benches $stage ring:binding_ring fold:indexer_fold || return 1
    cp "$base/frame_base" "$base/ring_base" "$base/fold_base" $stage/
    pack_stage 47 $stage
}

# Batch 47: the fold's 4-frame drain (indexer_fold, base and now, 7 rounds, the order swapped each
# round), the callback's push alone (binding_ring's this_crate/1, likewise), then ours inside one process pinned to 2 cores (taskset -c 0,1,
# frame_overhead --interleave 20): the tree before and this one, everything on, and this one with
# no fold (GPU_CRASH_REPORTER_COST_NO_FOLD), 7 rounds, the order rotated; the indexer threads' CPU
# a frame (frame_overhead --configs 1) of both on 2 cores, 3 rounds. Lines to $OUT as they come.
device47() {
    unpack_batch 47
    local r order which env
    fold_rounds 'churn_1000_buffers_4_frames_a_drain$'
    bench_rounds ring 'this_crate/1$'
    for r in $(seq 1 7); do
        order=$(rotation $r base-on now-on now-nofold)
        for which in $order; do
            env=X47=1
            case $which in *nofold) env=GPU_CRASH_REPORTER_COST_NO_FOLD=1 ;; esac
            ln -sf frame_${which%-*} $bin/frame_overhead
            two_core_process $r $which $env
        done
    done
    for r in $(seq 1 3); do
        for b in frame_base frame_now; do
            taskset -c 0,1 timeout -s KILL 60 $bin/$b --configs 1 --frames 600 --warmup 60 \
                > $logs/threads-$r-$b.out 2> $logs/threads-$r-$b.err
            echo "2 cores threads round $r $b rc=$? $(grep -o 'frame_overhead plugin=1.*' $logs/threads-$r-$b.out)" \
                | tee -a "$OUT/threads.txt"
        done
    done
    tar -C $logs -czf "$OUT/run47-results.tar.gz" .
}

# Batch 47b: this tree on all 16 cores: ours inside one process at 1,000 buffers a frame (7
# processes), then the scaling rows at 100 and 10,000 (5 processes each), on batch 47's package.
device47b() {
    sixteen_core_batch 47
    churn_rows
    tar -C $logs -czf "$OUT/run47b-results.tar.gz" .
}

# Batch 48 (issue 35): frame_overhead and the indexer_fold bench of this tree (the fold copies
# chunks out of the ring; a thread that finds the fold taken stages the ring aside) and of a base
# tree (BASE48: a folder holding frame_base and fold_base), packed into .devrun/b48.tar.xz.
build48() {
    frame_and_fold_package 48 "${BASE48:?a folder with frame_base and fold_base of the base tree}"
}

# frame_overhead and the indexer_fold bench of this tree (frame_now, fold_now) and of a base tree
# (folder $2 holding frame_base and fold_base), packed into .devrun/b$1.tar.xz.
frame_and_fold_package() {
    local stage=/tmp/gv-stage$1
    stage_frame_and_benches $stage fold:indexer_fold || return 1
    cp "$2/frame_base" "$2/fold_base" $stage/
    pack_stage $1 $stage
}

# One frame_overhead process ($bin/$2) pinned to 2 cores (taskset -c 0,1) beside $3 busy loops
# pinned there too (another program keeping a player's 2 cores busy), 1,500 frames, round $1; its
# line (with the events it dropped) copied to $OUT/hogs.txt.
busy_two_core_process() {
    local r=$1 b=$2 hogs=$3 pids=() i
    for i in $(seq 1 $hogs); do
        taskset -c 0,1 sh -c 'while :; do :; done' &
        pids+=($!)
    done
    taskset -c 0,1 timeout -s KILL 120 $bin/$b --frames 1500 --warmup 60 \
        > $logs/hogs-$r-$b.out 2> $logs/hogs-$r-$b.err
    local rc=$?
    kill "${pids[@]}"
    wait "${pids[@]}" 2> /dev/null
    echo "2 busy cores round $r $b hogs=$hogs rc=$rc $(grep -o 'frame_overhead plugin=1.*' $logs/hogs-$r-$b.out)" \
        | tee -a "$OUT/hogs.txt"
}

# Batch 48: the fold's 4-frame drain (indexer_fold, base and now, 7 rounds, the order swapped each
# round); on 2 cores shared with 2 busy loops, the events each tree drops (7 rounds, the order
# swapped); then ours inside one process pinned to 2 cores (frame_overhead --interleave 20), base
# and now, 7 rounds, the order swapped. Lines to $OUT as they come. $1: the package (48, or 48b:
# build48's package of the tree where the background thread never reads the ring).
device48() {
    local batch=${1:-48}
    unpack_batch $batch
    local r order b
    fold_rounds 'churn_1000_buffers_4_frames_a_drain$'
    for r in $(seq 1 7); do
        if [ $((r % 2)) -eq 1 ]; then order="frame_base frame_now"; else order="frame_now frame_base"; fi
        for b in $order; do
            busy_two_core_process $r $b 2
        done
    done
    two_core_base_and_now X48=1
    tar -C $logs -czf "$OUT/run$batch-results.tar.gz" .
}

# Package $1's frame_now on all 16 cores: ours inside one process at 1,000 buffers a frame, 7
# processes.
sixteen_core_batch() {
    unpack_batch $1
    ln -sf frame_now $bin/frame_overhead
    sixteen_core_rows
}

# Batch 48c: this tree (batch 48b's package) on all 16 cores.
device48c() {
    sixteen_core_batch 48b
}

# Batch 49 (issue 35, night): frame_overhead and indexer_fold of this tree (the ring's copy aside
# as one tight loop) and of a base tree (BASE49: a folder holding frame_base and fold_base).
build49() {
    frame_and_fold_package 49 "${BASE49:?a folder with frame_base and fold_base of the base tree}"
}

# Batch 49: the fold's 4-frame drain (indexer_fold, base and now, 7 rounds, the order swapped);
# ours inside one process pinned to 2 cores (--interleave 20), base and now, 7 rounds, the order
# swapped; now on all 16 cores (7 processes); now on 2 cores beside 2 busy loops (7 processes, the
# events each drops). Lines to $OUT as they come.
device49() {
    unpack_batch 49
    local r
    fold_rounds 'churn_1000_buffers_4_frames_a_drain$'
    two_core_base_and_now X49=1
    ln -sf frame_now $bin/frame_overhead
    sixteen_core_rows
    for r in $(seq 1 7); do
        busy_two_core_process $r frame_now 2
    done
    tar -C $logs -czf "$OUT/run49-results.tar.gz" .
}

# Batch 49c: indexer_fold of base, now and a control (.devrun/b49c.tar.xz holding fold_ctl: now's
# copy loop stamping the slot before copying it, as base did), 7 rounds, the order rotated; then
# ours inside one process on all 16 cores, base and now, 7 rounds, the order swapped.
device49c() {
    unpack_batch 49
    tar -C $bin -xJf .devrun/b49c.tar.xz
    local r b order
    for r in $(seq 1 7); do
        for b in $(rotation $r fold_base fold_now fold_ctl); do
            bench_run fold $r $b 'churn_1000_buffers_4_frames_a_drain$'
        done
    done
    for r in $(seq 1 7); do
        if [ $((r % 2)) -eq 1 ]; then order="base now"; else order="now base"; fi
        for b in $order; do
            ln -sf frame_$b $bin/frame_overhead
            timeout -s KILL 60 $bin/frame_overhead --interleave 20 --frames 600 --warmup 60 \
                > $logs/il16-$r-$b.out 2> $logs/il16-$r-$b.err
            echo "16 cores round $r $b rc=$? $(grep -o 'frame_overhead_interleave.*' $logs/il16-$r-$b.out)" \
                | tee -a "$OUT/interleave.txt"
        done
    done
}

# Batch 41 (issue 35): frame_overhead and the indexer_fold bench of this tree, and the indexer_fold
# bench of the tree before issue 35's last fold changes (FOLD41_BASE, a binary built there), packed
# into .devrun/b41.tar.xz.
build41() {
    build_fold_package 41 "${FOLD41_BASE:?the indexer_fold binary of the base tree}"
}

# Batch 41a (issue 35): ours inside one process under 1,000 buffers a frame (frame_overhead
# --interleave 20), this tree against its control (the background fold woken every frame,
# GPU_CRASH_REPORTER_COST_FOLD_EVERY_FRAME), 7 processes each, the order swapped every round; each
# line copied to $OUT as it comes.
device41a() {
    unpack_batch 41
    local r which order env
    for r in $(seq 1 "${ROUNDS41:-7}"); do
        if [ $((r % 2)) -eq 1 ]; then order="quarter every"; else order="every quarter"; fi
        for which in $order; do
            env=X41=1; [ $which = every ] && env=GPU_CRASH_REPORTER_COST_FOLD_EVERY_FRAME=1
            env $env timeout -s KILL 60 $bin/frame_overhead --interleave 20 --frames 600 --warmup 60 \
                > $logs/il-$r-$which.out 2> $logs/il-$r-$which.err
            echo "round $r $which rc=$? $(grep -o 'frame_overhead_interleave.*' $logs/il-$r-$which.out)" \
                | tee -a "$OUT/interleave.txt"
        done
    done
}

# Batch 41b (issue 35): the scaling rows at 100 and 10,000 buffers a frame (ours inside one process,
# 5 processes each), and the indexer_fold bench now and before (7 rounds, order swapped).
device41b() {
    unpack_batch 41
    fold_rounds ''
    churn_rows
}

# Batch 32 (issue 33): the pipeline naming's cost inside one process: the realistic scene with the
# naming paused and resumed every 20 frames (`--interleave-names 20`, the plugin's `cost-switches`),
# SCENE32_PROCESSES processes (default 7), each line copied to $OUT as it comes.
device32() {
    setup_device
    tar -C $bin -xJf .devrun/b32.tar.xz
    echo "commit $(cat .devrun/b32.commit)" | tee -a $logs/env.txt
    local p
    for p in $(seq 1 "${SCENE32_PROCESSES:-7}"); do
        timeout -s KILL 40 $bin/scene_names --interleave-names 20 --frames ${SCENE_FRAMES:-300} \
            --warmup ${SCENE_WARMUP:-30} > $logs/names-$p.out 2> $logs/names-$p.err
        echo "process $p rc=$? $(grep -o 'realistic_scene_names_interleave.*' $logs/names-$p.out)" \
            | tee -a "$OUT/names.txt"
    done
}

# Batch 31 (issues 33 and 35), on one machine start, each result copied to $OUT as it comes (a call
# that runs past its limit still returns what is done): the realistic scene with and without the
# pipeline naming (batch 30's package), ABBA, SCENE31_ROUNDS rounds (default 7); then ours inside one
# process (frame_overhead --interleave 20, 7 processes) and the ring against crossbeam at 2 and 4
# producers (7 rounds, order swapped), batch 29's package. No hang here: on the H100 host an endless
# shader kept the GPU busy for other processes for about 9 minutes (batch 30).
device31() {
    setup_device
    tar -C $bin -xJf .devrun/b30.tar.xz
    tar -C $bin -xJf .devrun/b29.tar.xz
    echo "commit $(cat .devrun/b30.commit); $(nproc) cores" | tee -a $logs/env.txt
    cp $logs/env.txt "$OUT/"
    local rounds=${SCENE31_ROUNDS:-7} frames=${SCENE_FRAMES:-150} warmup=${SCENE_WARMUP:-30}
    local r which order q
    for r in $(seq 1 "$rounds"); do
        if [ $((r % 2)) -eq 1 ]; then order="unnamed named"; else order="named unnamed"; fi
        for which in $order; do
            timeout -s KILL 45 "$bin/scene_$which" --frames "$frames" --warmup "$warmup" \
                > "$logs/r$r-$which.out" 2> "$logs/r$r-$which.err"
            echo "round $r $which rc=$? $(grep -o 'mean_us=[0-9.]*' "$logs/r$r-$which.out") $(grep -o 'median_us=[0-9.]*' "$logs/r$r-$which.out") $(grep -c 'GPU hang' "$logs/r$r-$which.err") hangs" | tee -a "$OUT/scene.txt"
        done
    done
    echo "== interleaved, blocks of 20 frames, 7 processes"
    timeout -s KILL 150 $bin/frame_overhead --compare --interleave 20 --rounds 7 \
        --frames 600 --warmup 60 > $logs/interleave.out 2> $logs/interleave.err
    echo "interleave rc=$?"
    cp $logs/interleave.out "$OUT/"
    cut -c1-300 $logs/interleave.out | tail -12
    for r in $(seq 1 7); do
        if [ $((r % 2)) -eq 1 ]; then order="this_crate_push_only crossbeam_array_queue"
        else order="crossbeam_array_queue this_crate_push_only"; fi
        for q in $order; do
            (cd /tmp && timeout -s KILL 30 $bin/binding_ring --bench --noplot --warm-up-time 1 \
                --measurement-time 2 "^binding_ring/$q/(2|4)\$" > $logs/ring-r$r-$q.out 2> $logs/ring-r$r-$q.err)
            echo "ring round $r $q: $(grep -E "^binding_ring/|time:" $logs/ring-r$r-$q.out | paste - - \
                | sed 's/  */ /g' | cut -c1-160 | tr '\n' ';')" | tee -a "$OUT/ring.txt"
        done
    done
    tar -C $logs -czf "$OUT/run31-results.tar.gz" .
}

# Batch 30 (issue 33): the endless shader's real hang on the real driver (what the report names),
# then the realistic scene with the pipeline naming (plugin feature `pbr`) against the plugin without
# it, alternating, the order flipped every round; SCENE30_ROUNDS rounds (default 7).
device30() {
    setup_device
    tar -C $bin -xJf .devrun/b30.tar.xz
    echo "commit $(cat .devrun/b30.commit)" | tee -a $logs/env.txt
    mkdir -p $logs/sh
    (cd $bin && SHADER_HANG_ASSETS=$bin/assets GPU_CRASH_REPORT_DIR=$logs/sh/reports \
        timeout -s KILL 90 ./shader_hang --exact child --ignored --nocapture \
        > $logs/sh/out.txt 2> $logs/sh/err.txt)
    echo "shader_hang rc=$?"
    grep -E 'loop forever|GPU hang|GPU crash report' $logs/sh/err.txt | cut -c1-400
    for f in $logs/sh/reports/*.json; do
        python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["summary"]); print(json.dumps(r.get("running"), indent=1)[:3000])' "$f"
    done
    local rounds=${SCENE30_ROUNDS:-7} frames=${SCENE_FRAMES:-200} warmup=${SCENE_WARMUP:-50}
    local r which order
    for r in $(seq 1 "$rounds"); do
        if [ $((r % 2)) -eq 1 ]; then order="unnamed named"; else order="named unnamed"; fi
        for which in $order; do
            local exe=$bin/scene_$which args=""
            timeout -s KILL 60 "$exe" $args --frames "$frames" --warmup "$warmup" \
                > "$logs/r$r-$which.out" 2> "$logs/r$r-$which.err"
            echo "round $r $which rc=$? $(grep -o 'mean_us=[0-9.]*' "$logs/r$r-$which.out") $(grep -o 'median_us=[0-9.]*' "$logs/r$r-$which.out")"
        done
    done
    tar -C $logs -czf "$OUT/run30-results.tar.gz" .
}

case "${1:-}" in
    device30) device30 ;;
    build30) build30 ;;
    device31) device31 ;;
    device32) device32 ;;
    build42) build42 ;;
    build44) build44 ;;
    device44) device44 ;;
    device45) device45 ;;
    device46) device46 ;;
    build47) build47 ;;
    build48) build48 ;;
    device48) device48 ;;
    device48b) device48 48b ;;
    device48c) device48c ;;
    build49) build49 ;;
    device49) device49 ;;
    device49c) device49c ;;
    device47) device47 ;;
    device47b) device47b ;;
    device42) device42 ;;
    build41) build41 ;;
    device41a) device41a ;;
    device41b) device41b ;;
    build) build ;;
    build27) build27 ;;
    build28) build28 ;;
    build29) build29 ;;
    device29) device29 ;;
    device28) device28 ;;
    device27b) device27b ;;
    device27) device27 ;;
    build9) build9 ;;
    build10) build10 ;;
    device10) device10 ;;
    device11) device11 ;;
    build12) build12 ;;
    device12) device12 ;;
    device13) device13 ;;
    device14) device14 ;;
    device15) device15 ;;
    device16) device16 ;;
    build17) build17 ;;
    device17) device17 ;;
    build18) build18 ;;
    device18) device18 ;;
    build19) build19 ;;
    device19) device19 ;;
    build20) build20 ;;
    device20) device20 ;;
    device21) device21 ;;
    build22) build22 ;;
    device22) device22 ;;
    device22b) device22b ;;
    build25) build25 ;;
    device25) device25 ;;
    device25b) device25b ;;
    device25c) device25c ;;
    build26) build26 ;;
    device26) device26 ;;
    device9) device9 ;;
    device8) device8 ;;
    device7) device7 ;;
    device6) device6 ;;
    build5) build5 ;;
    device5) device5 ;;
    device) device ;;
    device2) device2 ;;
    device3) device3 ;;
    device4) device4 ;;
    *) echo "usage: $0 build | build5 | build9 | build10 | build12 | build17 | build18 | build19 | build20 | build22 | build25 | build26 | build27 | device | device2 … device27"; exit 2 ;;
esac
