#!/usr/bin/env bash
# The real-fault matrix on the NVIDIA host (issue 47; results in docs/driver-facts.md and
# docs/gpu-validation/fault-matrix-2026-12-07*/).
#
#   tools/nv_fault_matrix/run-matrix.sh build                # here: build, strip, stage into .nvfm/
#   tools/nv_fault_matrix/run-matrix.sh device PLAN...       # there (no Rust, no network)
#
# A PLAN entry is CASE:CONFIG (see src/main.rs) or a group CASE:CONFIG,CASE:CONFIG,... Entries run
# in the order given, each process under `timeout -s KILL` (wait cap + 30 s). Prefixes:
# - `canary+CASE:CONFIG` runs a canary process beside that one case and judges from it whether a
#   fault in one process disturbs another's work (see canary_verdict). If it does not, later groups
#   run their members at once, started MATRIX_STAGGER_S apart; if it does (or before any canary),
#   a group's members run one after another, with the wait cap MATRIX_SERIAL_CAP_S.
# - `par+GROUP` runs only at once: it is skipped when the canary said the runs disturb each other.
# - `last+ENTRY` may use the reserve (MATRIX_RESERVE_S): the endless shader, which must run last.
# A CONFIG ending in `-nudge` or `-nudgeMS` (`off-nudge`, `off-nudge500`) runs that config with
# `--nudge-ms MS` (default MATRIX_NUDGE_MS): the in-process nudge, a second VkDevice's dispatch MS
# after the faulting submit (see src/main.rs). The run's files are named CASE-CONFIG-nudge[MS].
# Before each entry the script checks that it can end (cap + 12 s, + the stagger per extra member)
# before MATRIX_DEADLINE_S - MATRIX_RESERVE_S (seconds since the script began); one that cannot is
# written as skipped. After each entry: the new kernel-log Xid lines (all of them in GROUP.xid; each
# run's own, by the pid its JSON names, in CASE-CONFIG.xid), nvidia-smi utilisation, and everything
# packed into $OUT/matrix.tar.gz (so a call cut short still returns what ran).
#
# What was passed to the device tool's `run` (`.gl` holds the Vulkan loader debs, see
# /work/.library/device/README.md; `.nvfm` the stripped binary):
#   run(command="bash tools/nv_fault_matrix/run-matrix.sh device <plan>", carry=[".gl", ".nvfm"], timeout_s=600)
# Environment: MATRIX_DEADLINE_S (560), MATRIX_RESERVE_S (0), MATRIX_WAIT_CAP_S (45: each run's wait
# for its fence), MATRIX_SERIAL_CAP_S (the cap after a canary found the runs disturbed; default the
# same), MATRIX_STAGGER_S (2), MATRIX_CANARY_S (how long a canary runs; default cap + 10),
# MATRIX_NUDGE_MS (2000).
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

# Whether the canary beside a fault was disturbed: prints one line and exits 0 when it was not.
# Baseline: the canary's samples before the faulting process began (t < 2.5 s of its loop; the
# faulting process starts 3 s after the canary process). After: its samples from t >= 10 s, when
# the fault has happened (about 5 s) and the faulting process is hung. Not disturbed: no error,
# the median after at most twice the baseline's, and no sample after over 100 ms.
canary_verdict() {
    python3 - "$1" <<'PY'
import json, statistics, sys
last = None
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{"):
        try:
            last = json.loads(line)
        except json.JSONDecodeError:
            pass
c = (last or {}).get("canary")
if not c:
    print("canary: no result"); sys.exit(1)
s = c["samples"]
base = [x[1] for x in s if x[0] < 2500 and x[2] == "SUCCESS"]
after = [x[1] for x in s if x[0] >= 10000 and x[2] == "SUCCESS"]
if not base or not after:
    print(f"canary: too few samples (before {len(base)}, after {len(after)})"); sys.exit(1)
mb, ma, wa = statistics.median(base), statistics.median(after), max(after)
ok = c["errors"] == 0 and ma <= 2 * mb and wa <= 100
print(f"canary: {len(s)} samples, errors {c['errors']}, before median {mb:.2f} ms (n={len(base)}), "
      f"after median {ma:.2f} ms, worst {wa:.2f} ms (n={len(after)}), worst overall {c['worst_ms']:.2f} ms: "
      + ("not disturbed" if ok else "DISTURBED"))
sys.exit(0 if ok else 1)
PY
}

device() {
    : "${OUT:?OUT must be set (the device tool sets it)}"
    t_start=$(date +%s)
    local deadline=${MATRIX_DEADLINE_S:-560} reserve=${MATRIX_RESERVE_S:-0}
    cap=${MATRIX_WAIT_CAP_S:-45}
    stagger=${MATRIX_STAGGER_S:-2}
    local serial_cap=${MATRIX_SERIAL_CAP_S:-$cap}
    # parallel: 1 once a canary found no disturbance; groups then run their members at once.
    parallel=0
    group_no=0
    # MATRIX_SKIP_DEBS / MATRIX_VK_DRIVER_FILES: only to rehearse this function here on lavapipe.
    if [ -z "${MATRIX_SKIP_DEBS:-}" ]; then
        for f in .gl/*.deb; do dpkg -x "$f" /; done
        ldconfig
    fi
    export VK_DRIVER_FILES=${MATRIX_VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
    R=/tmp/nvfm-results bin=$ROOT/.nvfm/nv_fault_matrix
    mkdir -p $R
    {
        echo "date_utc=$(date -u +%FT%TZ)"
        echo "command=$0 device $*"
        echo "MATRIX_DEADLINE_S=$deadline MATRIX_RESERVE_S=$reserve MATRIX_WAIT_CAP_S=$cap MATRIX_SERIAL_CAP_S=$serial_cap MATRIX_STAGGER_S=$stagger MATRIX_CANARY_S=${MATRIX_CANARY_S:-cap+10} MATRIX_NUDGE_MS=${MATRIX_NUDGE_MS:-2000}"
        nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv
        uname -r
    } > $R/env.txt 2>&1
    cat $R/env.txt
    dmesg >/dev/null 2>&1 && echo "dmesg readable" >> $R/env.txt || echo "dmesg NOT readable" >> $R/env.txt
    for entry in "$@"; do
        local canary="" end=$((deadline - reserve)) paronly=""
        # Prefixes, in any order. last+: the entry that may use the reserved tail (the endless
        # shader, which must run last).
        while :; do
            case $entry in
                canary+*) canary=1; entry=${entry#canary+} ;;
                last+*) end=$deadline; entry=${entry#last+} ;;
                par+*) paronly=1; entry=${entry#par+} ;;
                *) break ;;
            esac
        done
        local members
        IFS=, read -ra members <<< "$entry"
        if [ ${#members[@]} -gt 1 ] && [ $parallel = 1 ]; then
            run_group "$end" "" "${members[@]}"
        elif [ -n "$paronly" ]; then
            echo "${entry} skipped: runs only at once, and no canary found the runs undisturbed" | tee -a $R/summary.txt
        else
            for m in "${members[@]}"; do run_group "$end" "$canary" "$m"; done
        fi
        if [ -n "$canary" ]; then
            local cname=canary-beside-${members[0]/:/-}
            if canary_verdict $R/$cname.json | tee -a $R/summary.txt; then
                parallel=1
            else
                cap=$serial_cap
            fi
            echo "parallel=$parallel cap=${cap}s from here on" | tee -a $R/summary.txt
        fi
        pack
    done
    pack
    ls -la "$OUT"
}

xid_count() { dmesg 2>/dev/null | grep -ci xid || true; }
pack() { tar -C /tmp -czf "$OUT/matrix.tar.gz" nvfm-results; }

# run_group END CANARY CASE:CONFIG...: the members at once, MATRIX_STAGGER_S apart (one member:
# alone); CANARY non-empty: a canary process beside the (single) member, started 3 s before it.
run_group() {
    local end=$1 canary=$2; shift 2
    local n=$# per=$((cap + 30))
    local need=$((cap + 12 + stagger * (n - 1)))
    # The canary starts 3 s before its neighbour and runs MATRIX_CANARY_S (default cap + 10 s).
    local canary_s=${MATRIX_CANARY_S:-$((cap + 10))}
    [ -n "$canary" ] && [ $((canary_s + 5)) -gt "$need" ] && need=$((canary_s + 5))
    local now=$(( $(date +%s) - t_start ))
    if [ $((now + need)) -gt "$end" ]; then
        for m in "$@"; do
            echo "${m/:/-} skipped: deadline (t=${now}s, may need ${need}s, must end by ${end}s)" | tee -a $R/summary.txt
        done
        return
    fi
    group_no=$((group_no + 1))
    local g=group$(printf %02d $group_no)
    echo "$g: $* (at once: $([ $n -gt 1 ] && echo yes || echo no), cap ${cap}s, t=${now}s)" | tee -a $R/summary.txt
    local x0; x0=$(xid_count)
    if [ -n "$canary" ]; then
        local cname=canary-beside-${1/:/-}
        timeout -s KILL $per $bin --case canary --config off --canary-s "$canary_s" \
            > $R/$cname.json 2> $R/$cname.err &
        sleep 3
    fi
    local i=0
    for m in "$@"; do
        local c=${m%%:*} k=${m#*:} name=${m/:/-} nudge=()
        if [[ $k == *-nudge* ]]; then
            local nms=${k##*-nudge}
            nudge=(--nudge-ms "${nms:-${MATRIX_NUDGE_MS:-2000}}")
            k=${k%-nudge*}
        fi
        [ $i -gt 0 ] && sleep "$stagger"
        i=$((i + 1))
        (
            t0=$(date +%s%N)
            timeout -s KILL $per $bin --case "$c" --config "$k" --wait-cap-s "$cap" "${nudge[@]}" > $R/$name.json 2> $R/$name.err
            rc=$?
            echo "rc=$rc wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" > $R/$name.rc
        ) &
    done
    wait
    local x1; x1=$(xid_count)
    dmesg 2>/dev/null | grep -i xid | tail -n $(( x1 > x0 ? (x1 - x0 > 60 ? 60 : x1 - x0) : 0 )) > $R/$g.xid 2>/dev/null
    local smi; smi=$(timeout -s KILL 10 nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>&1)
    echo "$smi" >> $R/$g.xid
    for m in "$@"; do
        local name=${m/:/-}
        local pid; pid=$(grep -o '"pid":[0-9]*' $R/$name.json | head -n 1 | cut -d: -f2)
        if [ -n "$pid" ]; then grep "pid=$pid," $R/$g.xid > $R/$name.xid; else : > $R/$name.xid; fi
        echo "$smi" >> $R/$name.xid
        local last; last=$(tail -n 1 $R/$name.json | grep -o '"outcome":{[^}]*}' | head -c 400)
        echo "$name $(cat $R/$name.rc 2>/dev/null) pid=${pid:-?} own_xid=$(grep -c Xid $R/$name.xid) group_xid=$((x1 - x0)) $g $last" \
            | tee -a $R/summary.txt
    done
}

case ${1:-} in
    build) build ;;
    device) shift; device "$@" ;;
    *) echo "usage: $0 build | device ENTRY... (CASE:CONFIG[,CASE:CONFIG...], prefixes canary+ par+ last+)" >&2; exit 2 ;;
esac
