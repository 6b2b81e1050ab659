#!/usr/bin/python3
"""Times one suite layer's default kernel against the same layer with each set of hints, in one process:
every kernel timed three times, interleaved, best kept (the A/B figures of docs/PERFORMANCE.md).

    PYTHONPATH=build/python DECONVJIT_TUNING_DB= /usr/bin/python3 tools/scripts/ab_hints.py \\
        --suite tools/suites/corpus.jsonl --name densepose_index_uv_b8 --layout NXC '{"algorithm":"col"}'

To time an older default against today's, record its choices with the older build's module
(`deconvjit.compile(json).plan["choices"]`) and pass them here as hints: they rebuild exactly that plan.
"""
import argparse
import json

import deconvjit as d
import suite_layers


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("hints", nargs="*", help="tuning hints as JSON, one kernel each")
    ap.add_argument("--suite", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--layout", default="NCX", choices=["NCX", "NXC"])
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16"])
    ap.add_argument("--isa", default="best", choices=["best", "avx512_core", "avx2"])
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    r = next(r for _, name, r in suite_layers.read([a.suite]) if name == a.name)
    desc = json.dumps(dict(suite_layers.in_layout(r, a.layout), dtype=a.dtype))
    kernels = [("default", d.compile(desc, isa=a.isa))]
    for h in a.hints:
        kernels.append((h, d.compile(desc, isa=a.isa, hints=json.loads(h))))
    best = {label: float("inf") for label, _ in kernels}
    for _ in range(3):
        for label, k in kernels:
            best[label] = min(best[label], d.time(k, threads=a.threads, min_time=0.1))
    for label, k in kernels:
        print(f"{best[label]:9.3f} ms  {best['default'] / best[label]:5.2f}x  {k.name}  {label}")


if __name__ == "__main__":
    main()
