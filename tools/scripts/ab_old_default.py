#!/usr/bin/python3
"""Times a new default plan against the old one on every suite layer whose kernel the change moves, in one
process: both kernels three times in turn, best kept; one JSON object per changed layer.

The old plans come from the same build with the new rule switched off by an environment variable (a
temporary switch in the rule, e.g. `if (getenv("DJ_OLD")) return old_rule;`, removed before the commit): a
child process with that variable set records each layer's `plan["choices"]`, and this process compiles a
kernel from them as hints (bands the old build could not have are pinned off).

    PYTHONPATH=build/python DECONVJIT_TUNING_DB= DECONVJIT_CACHE_DIR= /usr/bin/python3 \\
        tools/scripts/ab_old_default.py --isa avx2 --dtype f16 --layout NXC tools/suites/realworld.jsonl ...
"""
import argparse
import json
import os
import subprocess
import sys

import deconvjit as d
import suite_layers

SWITCH = "DJ_OLD"


def descriptors(suites, dtype, layout):
    for path, name, r in suite_layers.read(suites):
        yield path + ":" + name, json.dumps(dict(suite_layers.in_layout(r, layout), dtype=dtype))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suites", nargs="+")
    ap.add_argument("--isa", default="best", choices=["best", "avx512_core", "avx2"])
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16"])
    ap.add_argument("--layout", default="NCX", choices=["NCX", "NXC"])
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    rows = descriptors(a.suites, a.dtype, a.layout)
    if os.environ.get(SWITCH):  # the child: the old plans' choices
        for name, desc in rows:
            try:
                k = d.compile(desc, isa=a.isa)
            except Exception:
                continue
            print(json.dumps(dict(name=name, kernel=k.name + k.plan["layout"], choices=k.plan["choices"])))
        return
    child = subprocess.run([sys.executable] + sys.argv, env=dict(os.environ, **{SWITCH: "1"}),
                           capture_output=True, text=True, check=True).stdout
    old = {r["name"]: r for r in map(json.loads, child.splitlines())}
    for name, desc in rows:
        if name not in old:
            continue
        new = d.compile(desc, isa=a.isa)
        if old[name]["kernel"] == new.name + new.plan["layout"]:
            continue
        choices = old[name]["choices"]
        if choices.get("band_rows", -1) < 0:
            choices["band_rows"] = 0
        was = d.compile(desc, isa=a.isa, hints=choices)
        t_new = t_old = float("inf")
        for _ in range(3):
            t_new = min(t_new, d.time(new, threads=a.threads, min_time=0.1))
            t_old = min(t_old, d.time(was, threads=a.threads, min_time=0.1))
        print(json.dumps(dict(name=name, isa=a.isa, dtype=a.dtype, layout=a.layout, new=new.name, old=was.name,
                              new_ms=t_new, old_ms=t_old, speedup=t_old / t_new)), flush=True)


if __name__ == "__main__":
    main()
