#!/usr/bin/env python3
"""Prints the markdown table of one or more fault-matrix results folders (docs/driver-facts.md,
"Real-fault matrix on NVIDIA, raw Vulkan"); each folder is an unpacked matrix.tar.gz or its kept copy.

    python3 tools/nv_fault_matrix/summarize.py docs/gpu-validation/fault-matrix-2026-12-07 \
        docs/gpu-validation/fault-matrix-2026-12-07b

Reads the last JSON line of each CASE-CONFIG.json (the process's final phase), its CASE-CONFIG.xid
and, where the folder has one, canary-beside-CASE-CONFIG.json (the run then had a canary process
beside it). A run that two folders hold under the same name gets one row per folder.
"""
import glob
import json
import os
import re
import sys

CASES = ["uaf-descriptor", "bda-freed", "bda-past-end", "image-freed", "endless", "healthy"]
LABEL = {
    "uaf-descriptor": "(a) descriptor use-after-free",
    "bda-freed": "(b) BDA into freed memory",
    "bda-past-end": "(c) BDA 256 MiB past a live buffer",
    "image-freed": "(d) sampled image, memory freed",
    "endless": "(e) endless shader",
    "healthy": "healthy control (a without the free)",
}
CONFIGS = ["off", "dbg", "rt", "ac", "ser", "ckpt", "all"]
CONFIG_LABEL = {"dbg": "dbg (0x1)", "rt": "rt (0x2)", "ac": "ac (0x4)", "ser": "ser (0x8)", "all": "all (0xf + ckpt)"}


def last_json(path):
    last = None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    last = json.loads(line)
                except json.JSONDecodeError:
                    pass
    return last


def mib(x):
    v = x / (1 << 20)
    return f"{v:.1f}" if v < 10 else f"{v:,.0f}"


def ckpts(c, enabled):
    if not enabled:
        return "not enabled"
    if not c:
        return "—"
    data = c.get("data", {})
    entries = data.get("nv2", data.get("nv"))
    if not entries:
        return "none"
    return ", ".join(f"{e['stage']}={e['marker']}" for e in entries)


def fault(fi):
    if not fi or not fi.get("enabled"):
        return "not enabled"
    r = fi.get("counts_result")
    if r not in ("SUCCESS", "INCOMPLETE"):
        return f"`VK_{r}`"
    parts = [f"{fi.get('address_info_count')} addresses"]
    for a in fi.get("addresses", []):
        parts.append(f"{a['type']} {a['address']} ±{a['precision']}")
    parts.append(f"{fi.get('vendor_info_count')} vendor infos")
    for v in fi.get("vendor", []):
        parts.append(f"vendor \"{v['description']}\" code {v['code']} data {v['data']}")
    parts.append(f"description \"{fi.get('description', '')}\"")
    parts.append(f"binary {fi.get('vendor_binary_size')} B")
    if fi.get("vendor_binary_header"):
        h = fi["vendor_binary_header"]
        parts.append(f"header v{h['header_version']} vendor {h['vendor_id']} device {h['device_id']} driver {h['driver_version']}")
    return "; ".join(parts)


def fault_both(d):
    """The answer at 3 s (or just before the nudge) and at the end: one text when they agree."""
    during, end = d.get("fault_info_during", d.get("fault_info_before_nudge")), d.get("fault_info")
    if during is None:
        return fault(end)
    a, b = fault(during), fault(end)
    when = "3 s" if "fault_info_during" in d else "before the nudge"
    return a if a == b else f"{when}: {a}; end: {b}"


def named(fi, case):
    if case == "healthy":
        return "—"
    if not fi or not fi.get("addresses"):
        return "no address"
    out = []
    for a, r in zip(fi.get("addresses", []), fi.get("addresses_resolved", [])):
        names = sorted({m.get("name") for m in r["matches"] if m.get("name")})
        unbound = any(m.get("unbind") for m in r["matches"])
        if names:
            out.append(f"{a['type']}: {', '.join(names)}" + (" (unbound before the fault)" if unbound else ""))
        else:
            out.append(f"{a['type']}: none")
    return "; ".join(out)


def nudge(d, lost_ms):
    """The in-process nudge (--nudge-ms): when its device was made, its first dispatch, and whether
    its dispatches still came back after the first device's loss."""
    n = d.get("nudge")
    if not d["params"].get("nudge_ms"):
        return ""
    if not n:
        return "; no nudge (the fence signalled first or the process ended)"
    steps = {s["what"]: s for s in n["steps"]}
    parts = []
    if "device created" in steps:
        s = steps["device created"]
        parts.append(f"nudge device made at {s['after_submit_ms'] / 1000:.2f} s ({s['extra']['call_ms']:.0f} ms)")
    if "failed" in steps:
        parts.append(f"nudge failed: {steps['failed']['extra']['call']} {steps['failed']['extra']['result']}")
    sm = n.get("samples", [])
    if sm:
        t, w, r = sm[0]
        parts.append(f"its first dispatch {r} after {w:,.0f} ms (back at {(t + w) / 1000:.2f} s)")
        if lost_ms is not None:
            after = [x for x in sm if x[0] > lost_ms]
            ok = sum(1 for x in after if x[2] == "SUCCESS")
            parts.append(f"{ok} of {len(after)} nudge dispatches after the loss SUCCESS")
        bad = [x for x in sm if x[2] != "SUCCESS"]
        if bad:
            parts.append(f"nudge dispatch {bad[0][2]} at {bad[0][0] / 1000:.2f} s")
        else:
            parts.append(f"{len(sm)} nudge dispatches, all SUCCESS, worst {max(x[1] for x in sm):,.0f} ms")
    return "; " + "; ".join(parts)


def outcome(d):
    o = d.get("outcome") or {}
    cap = d["params"]["wait_cap_s"]
    lost = o.get("device_lost_ms")
    return outcome_only(d, o, cap) + nudge(d, lost)


def outcome_only(d, o, cap):
    nms = d["params"].get("nudge_ms")
    if o.get("device_lost_ms") is not None:
        after = f", {(o['device_lost_ms'] - nms) / 1000:.1f} s after the nudge" if nms and d.get("nudge") else ""
        return f"lost at {o['device_lost_ms'] / 1000:.1f} s ({o.get('device_lost_seen_by')}){after}"
    if o.get("fence") == "signalled":
        return f"signalled {o['signalled_ms']:,.0f} ms, no loss in the {d['params']['observe_s']:.0f} s after"
    if o:
        return f"no signal, no loss in {cap:.0f} s"
    return f"(process ended in phase {d.get('phase')})"


def budget(d):
    """Device-local heap usage in MiB before the submit -> after the free -> at the end, / budget."""
    parts = []
    for k in ("budget_before", "budget_after_free", "budget_at_end"):
        b = d.get(k)
        if not b or not b.get("ext"):
            continue
        h = [x for x in b["heaps"] if x["device_local"]]
        parts.append((mib(h[0]["usage"]), mib(h[0]["budget"])))
    if not parts:
        return "—"
    if len({u for u, _ in parts}) == 1:
        return f"{parts[0][0]} throughout / {parts[-1][1]} MiB"
    return " → ".join(u for u, _ in parts) + f" / {parts[-1][1]} MiB"


def xids(path):
    lines = [l for l in open(path) if "Xid" in l] if os.path.exists(path) else []
    if not lines:
        return "none"
    kinds = [m.group(1) for l in lines for m in [re.search(r"Xid \(.*?\): (\d+)", l)] if m]
    counts = {k: kinds.count(k) for k in sorted(set(kinds), key=int)}
    return ", ".join(f"{n}× Xid {k}" for k, n in counts.items())


def main():
    rows = []
    for folder in sys.argv[1:]:
        for p in sorted(glob.glob(os.path.join(folder, "*.json"))):
            base = os.path.basename(p)[:-5]
            if base.startswith("canary"):
                continue
            d = last_json(p)
            if d is None or "case" not in d:
                continue
            canary = os.path.exists(os.path.join(folder, f"canary-beside-{base}.json"))
            cfg = d.get("config", "")
            nms = d["params"].get("nudge_ms")
            label = CONFIG_LABEL.get(cfg, cfg) + (" + canary" if canary else "") + (f" + nudge at {nms / 1000:g} s" if nms else "")
            ck_enabled = "VK_NV_device_diagnostic_checkpoints" in d.get("extensions_enabled", [])
            run = os.path.basename(os.path.normpath(folder)).replace("fault-matrix-", "")
            rows.append(
                (
                    d["case"],
                    cfg,
                    (canary, nms or 0),
                    run,
                    label,
                    outcome(d),
                    fault_both(d),
                    ckpts(d.get("checkpoints_after"), ck_enabled),
                    budget(d),
                    named(d.get("fault_info"), d["case"]),
                    xids(os.path.join(folder, base + ".xid")),
                )
            )

    def key(r):
        return (
            CASES.index(r[0]) if r[0] in CASES else 99,
            CONFIGS.index(r[1]) if r[1] in CONFIGS else 99,
            r[2],
            r[3],
        )

    print("| case | config | run | submit → fence / loss | `vkGetDeviceFaultInfoEXT` (3 s and end) | checkpoints (end) "
          "| device-local heap used: before → after free → end / budget | named object by address | kernel log |")
    print("|---|---|---|---|---|---|---|---|---|")
    seen = set()
    for r in sorted(rows, key=key):
        case = r[0]
        if case in seen:
            label = LABEL[case].split(")")[0] + ")" if LABEL.get(case, "").startswith("(") else LABEL.get(case, case)
        else:
            label = LABEL.get(case, case)
        seen.add(case)
        cells = (label, r[4], r[3]) + r[5:]
        print("| " + " | ".join(str(x).replace("|", "/") for x in cells) + " |")


if __name__ == "__main__":
    main()
