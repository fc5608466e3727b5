#!/usr/bin/env python3
"""Prints the markdown table of a fault-matrix results folder (the unpacked matrix.tar.gz).

    python3 tools/nv_fault_matrix/summarize.py docs/gpu-validation/fault-matrix-2026-12-07/call1 [...]

Reads the last JSON line of each CASE-CONFIG.json (the process's final phase) and CASE-CONFIG.xid.
"""
import glob
import json
import os
import re
import sys

CASES = ["uaf-descriptor", "bda-freed", "bda-past-end", "image-freed", "endless", "healthy"]
SHORT = {"a": "uaf-descriptor", "b": "bda-freed", "c": "bda-past-end", "d": "image-freed", "e": "endless"}
CONFIGS = ["off", "dbg", "rt", "ac", "ser", "ckpt", "all"]


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
    return f"{x / (1 << 20):.0f}"


def ckpts(c):
    if not c:
        return "—"
    data = c.get("data", {})
    if not data:
        return "—"
    parts = []
    for k in ("nv", "nv2"):
        if k in data:
            v = data[k]
            parts.append(f"{k}: " + (", ".join(f"{e['stage']}={e['marker']}" for e in v) if v else "none"))
    return "; ".join(parts)


def fault(fi):
    if not fi or not fi.get("enabled"):
        return "not enabled"
    s = f"{fi.get('counts_result')}"
    if fi.get("counts_result") not in ("SUCCESS", "INCOMPLETE"):
        return s
    s += f": {fi.get('address_info_count')} addr, {fi.get('vendor_info_count')} vendor, binary {fi.get('vendor_binary_size')} B"
    for a in fi.get("addresses", []):
        s += f"; {a['type']} {a['address']} ±{a['precision']}"
    for v in fi.get("vendor", []):
        s += f"; vendor \"{v['description']}\" code {v['code']} data {v['data']}"
    if fi.get("description"):
        s += f"; \"{fi['description']}\""
    if fi.get("vendor_binary_header"):
        h = fi["vendor_binary_header"]
        s += f"; header v{h['header_version']} vendor {h['vendor_id']} device {h['device_id']} driver {h['driver_version']}"
    return s


def named(fi):
    if not fi or not fi.get("addresses"):
        return "no address"
    out = []
    for r in fi.get("addresses_resolved", []):
        names = {m.get("name") or f"(unnamed {m['type']})" for m in r["matches"]}
        out.append(", ".join(sorted(names)) if names else f"none (nearest below: {r.get('nearest_named_below')})")
    return "; ".join(out)


def outcome(d):
    o = d.get("outcome") or {}
    if o.get("device_lost_ms") is not None:
        s = f"lost {o['device_lost_ms'] / 1000:.1f} s ({o.get('device_lost_seen_by')})"
    elif o.get("fence") == "signalled":
        s = f"signalled {o['signalled_ms']:.0f} ms, no loss in {d['params']['observe_s']:.0f} s after"
    elif o:
        s = f"no signal, no loss in {d['params']['wait_cap_s']:.0f} s"
    else:
        s = f"(process ended in phase {d.get('phase')})"
    return s


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
    return " → ".join(u for u, _ in parts) + f" / {parts[-1][1]} MiB"


def main():
    rows = []
    for folder in sys.argv[1:]:
        for p in sorted(glob.glob(os.path.join(folder, "*.json"))):
            base = os.path.basename(p)[:-5]
            if base.startswith("canary"):
                continue
            d = last_json(p)
            if d is None:
                rows.append((base, "", "(no JSON)", "", "", "", "", "", ""))
                continue
            xid = os.path.join(folder, base + ".xid")
            xids = []
            if os.path.exists(xid):
                xids = [l for l in open(xid) if "Xid" in l]
            kinds = sorted({m.group(1) for l in xids for m in [re.search(r"Xid \(.*?\): (\d+)", l)] if m})
            cal = d.get("calibration", {})
            rows.append(
                (
                    d.get("case", base),
                    d.get("config", ""),
                    outcome(d),
                    fault(d.get("fault_info")),
                    ckpts(d.get("checkpoints_after")),
                    budget(d),
                    named(d.get("fault_info")),
                    f"{len(xids)}× Xid {', '.join(kinds)}" if xids else "none",
                    f"{cal.get('predicted_busy_ms', '?')}",
                )
            )
    key = lambda r: (CASES.index(r[0]) if r[0] in CASES else 99, CONFIGS.index(r[1]) if r[1] in CONFIGS else 99)
    print("| case | config | submit → fence / loss | vkGetDeviceFaultInfoEXT | checkpoints after | device-local heap used before → after free → end / budget | named object by address | kernel Xid |")
    print("|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=key):
        print("| " + " | ".join(str(x).replace("|", "/") for x in r[:8]) + " |")


if __name__ == "__main__":
    main()
