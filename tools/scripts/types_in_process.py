#!/usr/bin/python3
"""Times each suite layer in f32, bf16 and f16 (both layouts) in one process, interleaved, and prints per layer
our best bf16 and f16 layouts' speed against our best f32 layout (above 1: the 16-bit type faster), then the
geomeans. `bench --dtype f32,bf16,f16` times the types one after another, so a host that slows down between
them moves the ratio; here every kernel is timed four times in turn and the best of each kept.

    PYTHONPATH=build/python DECONVJIT_TUNING_DB= DECONVJIT_CACHE_DIR= /usr/bin/python3 \\
        tools/scripts/types_in_process.py --suite tools/suites/realworld.jsonl --isa avx2
"""
import argparse
import json
import math

import deconvjit as d
import suite_layers

TYPES = ("f32", "bf16", "f16")
LAYOUTS = ("NCX", "NXC")


def kernels(layer, isa):
    """The layer's kernels by (type, layout)."""
    out = {}
    for layout in LAYOUTS:
        r = suite_layers.in_layout(layer, layout)
        for t in TYPES:
            r["dtype"] = t
            out[(t, layout)] = d.compile(json.dumps(r), isa=isa)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", required=True)
    ap.add_argument("--isa", default="best", choices=["best", "avx512_core", "avx2"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("names", nargs="*", help="only these layers")
    a = ap.parse_args()
    ratios = {t: [] for t in TYPES[1:]}
    for _, name, layer in suite_layers.read([a.suite]):
        if a.names and name not in a.names:
            continue
        ks = kernels(layer, a.isa)
        best = {key: float("inf") for key in ks}
        for _ in range(4):
            for key, k in ks.items():
                best[key] = min(best[key], d.time(k, threads=a.threads, min_time=0.05))
        fastest = {t: min(best[(t, layout)] for layout in LAYOUTS) for t in TYPES}
        for t in TYPES[1:]:
            ratios[t].append(fastest["f32"] / fastest[t])
        bf16 = min(LAYOUTS, key=lambda layout: best[("bf16", layout)])
        print(f"{name:24s} f32 {fastest['f32']:8.3f} ms  bf16 {ratios['bf16'][-1]:.2f}  f16 {ratios['f16'][-1]:.2f}"
              f"  {ks[('bf16', bf16)].name}", flush=True)
    for t, v in ratios.items():
        if v:
            print(f"{t} geomean {math.exp(sum(map(math.log, v)) / len(v)):.3f}, {sum(x < 1 for x in v)} of {len(v)} below 1")


if __name__ == "__main__":
    main()
