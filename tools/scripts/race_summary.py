#!/usr/bin/python3
"""Summarises `deconvjit bench --vs onednn --layout both --json` output files: the kernel race and
user-layout geomeans (from the summary object), our NCX time over our NXC time (geomean, and rows above
1.1), and for our faster layout the median % of peak on compute-bound rows and % of bandwidth on
memory-bound ones (as the rows' `bound` field classifies them).

    /usr/bin/python3 tools/scripts/race_summary.py run.json [more.json ...]
"""
import json
import math
import sys


def summarise(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    summary, rows = rows[-1], rows[:-1]
    ncx = {r["name"]: r for r in rows if r["layout"] == "NCX"}
    nxc = {r["name"]: r for r in rows if r["layout"] == "NXC"}
    ratios = [ncx[n]["ours_ms"] / nxc[n]["ours_ms"] for n in ncx if n in nxc]
    peak, bw = [], []
    for n in ncx:
        best = min((r for r in (ncx[n], nxc.get(n)) if r), key=lambda r: r["ours_ms"])
        (peak if best["bound"] == "compute" else bw).append(best["peak_pct"] if best["bound"] == "compute" else best["bw_pct"])
    peak.sort()
    bw.sort()
    race, user = summary["kernel_race"], summary["user_layout"]
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
    print(f"{path}: kernel race {race['geomean']:.3f} ({len(race['below_1'])} below 1.0: {', '.join(race['below_1'])})")
    print(f"  user layout NCX {user['NCX']['geomean']:.3f} ({len(user['NCX']['below_1'])} below), "
          f"NXC {user['NXC']['geomean']:.3f} ({len(user['NXC']['below_1'])} below)")
    print(f"  our NCX / our NXC {geo:.3f}, {sum(r > 1.1 for r in ratios)} of {len(ratios)} above 1.1")
    if peak:
        print(f"  compute-bound {len(peak)}: median {peak[len(peak) // 2]:.1f}% of peak, "
              f"{sum(p >= 85 for p in peak)} at 85%+, {sum(p >= 90 for p in peak)} at 90%+")
    if bw:
        print(f"  memory-bound {len(bw)}: median {bw[len(bw) // 2]:.1f}% of bandwidth, {sum(b >= 70 for b in bw)} at 70%+")


for p in sys.argv[1:]:
    summarise(p)
