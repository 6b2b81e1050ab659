#!/usr/bin/python3
"""Times the default plan against a forced family (or any hints) on every suite layer they apply to.

Each layer is re-expressed in the given layout and type, compiled twice (default, and with the hints),
and both kernels are timed three times, interleaved; the best of each is kept. Layers where the hints are
refused, or where the default already is that plan, are skipped. One JSON object per layer (the record
docs/data/colx_sweep_*.jsonl hold), and a line per layer on stderr.

    PYTHONPATH=build/python DECONVJIT_TUNING_DB= /usr/bin/python3 tools/scripts/family_sweep.py \\
        --hints '{"algorithm":"col_x"}' --layout NCX --dtype f32 > sweep.jsonl

With --over-default the hints replace only their own fields of the default plan's choices (the row's
x_split and ur_w, which follow from the tile, are left to the planner): the AVX2 3 x 4 tile of session 16,
    family_sweep.py --isa avx2 --layout NXC --over-default --min-cout 32 \
        --hints '{"oc_vectors":4,"weight_regs":3}' --suite tools/suites/corpus.jsonl --suite ...
"""
import argparse
import json
import math
import sys

import deconvjit as d
import suite_layers


def over_default(kernel, hints):
    """The kernel's choices with `hints` in place of their own fields (ur_w and x_split left to the planner)."""
    choices = {k: v for k, v in kernel.plan["choices"].items() if k not in ("ur_w", "x_split")}
    choices.update(hints)
    return choices


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hints", required=True, help="tuning hints as JSON")
    ap.add_argument("--suite", action="append", help="JSON Lines suites (default: corpus and realworld)")
    ap.add_argument("--layout", default="NCX", choices=["NCX", "NXC"])
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16"])
    ap.add_argument("--isa", default="best", choices=["best", "avx512_core", "avx2"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-cout", type=int, default=0, help="skip layers with more output channels (0: none)")
    ap.add_argument("--base", help="hints of the baseline plan (default: the heuristic's plan)")
    ap.add_argument("--min-dst-mb", type=float, default=0, help="skip layers with a smaller output (MB)")
    ap.add_argument("--min-src-mb", type=float, default=0, help="skip layers with a smaller source (MB)")
    ap.add_argument("--min-cout", type=int, default=0, help="skip layers with fewer output channels")
    ap.add_argument("--default-has", help="only layers whose default kernel name contains this (e.g. _col_)")
    ap.add_argument("--default-lacks", help="skip layers whose default kernel name contains this (e.g. _depthwise)")
    ap.add_argument("--over-default", action="store_true",
                    help="apply the hints over the default plan's choices instead of over the heuristic")
    a = ap.parse_args()
    hints = json.loads(a.hints)
    base = json.loads(a.base) if a.base else None
    suites = a.suite or ["tools/suites/corpus.jsonl", "tools/suites/realworld.jsonl"]
    for _, name, r in suite_layers.read(suites):
        if (a.max_cout and r["weights"][1] > a.max_cout) or r["weights"][1] < a.min_cout:
            continue
        r = dict(suite_layers.in_layout(r, a.layout), dtype=a.dtype)
        try:
            desc = json.dumps(r)
            default = d.compile(desc, isa=a.isa, hints=base) if base else d.compile(desc, isa=a.isa)
            forced = d.compile(desc, isa=a.isa, hints=over_default(default, hints) if a.over_default else hints)
        except Exception:
            continue
        if a.default_has and a.default_has not in default.name:
            continue
        if a.default_lacks and a.default_lacks in default.name:
            continue
        if math.prod(default.dst_shape) * default.dtype.itemsize < a.min_dst_mb * 1e6:
            continue
        if math.prod(default.src_shape) * default.dtype.itemsize < a.min_src_mb * 1e6:
            continue
        if default.name == forced.name:
            continue
        best_default = best_forced = float("inf")
        for _ in range(3):
            best_default = min(best_default, d.time(default, threads=a.threads, min_time=0.1))
            best_forced = min(best_forced, d.time(forced, threads=a.threads, min_time=0.1))
        rec = dict(name=name, cout=r["weights"][1], cin=r["weights"][0], k=r["weights"][2:],
                   s=r.get("strides"), src=r["src"], default=default.name, colx=forced.name,
                   d_ms=best_default, c_ms=best_forced, ratio=best_default / best_forced)
        print(json.dumps(rec), flush=True)
        print(f"{name:28s} {rec['ratio']:.2f}  {default.name}  {forced.name}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
