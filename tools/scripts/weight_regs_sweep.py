#!/usr/bin/python3
# weight_regs_sweep.py OUT [dtype] [hints-json]: every suite/holdout row (NXC and NCX) whose AVX2 default is
# direct/gemm with 32+ output channels: default vs the same choices with the hybrid tile (3 x 4, 3 weight vectors
# in registers), min of 3 interleaved, 2 threads. Run from the repository root with PYTHONPATH=build/python.
import json, sys, glob
import deconvjit as d
out = open(sys.argv[1], "w"); dtype = sys.argv[2] if len(sys.argv) > 2 else "f32"
alt = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {"oc_vectors": 4, "weight_regs": 3}
files = ["tools/suites/realworld.jsonl", "tools/suites/corpus.jsonl"]
files += sorted(glob.glob("docs/data/holdout_s*_layers.jsonl"))
for f in files:
    for l in open(f):
        if not l.strip(): continue
        r0 = json.loads(l); name = r0.pop("name")
        for layout in ("NXC", "NCX"):
            r = dict(r0)
            if layout == "NXC":
                s = r["src"]; r["src"] = [s[0]] + s[2:] + [s[1]]
            r["data_format"], r["dtype"] = layout, dtype
            desc = json.dumps(r)
            try:
                k0 = d.compile(desc, isa="avx2")
            except Exception:
                continue
            pl = k0.plan; ch = dict(pl["choices"])
            g = r.get("groups", 1); oc = r["weights"][1]
            if ch["algorithm"] not in ("direct", "gemm") or oc < 32: continue
            for key in ("ur_w", "x_split"): ch.pop(key, None)
            ch.update(alt)
            try:
                k1 = d.compile(desc, isa="avx2", hints=ch)
            except Exception as e:
                print(name, layout, "refused", e, file=sys.stderr); continue
            if k1.name == k0.name: continue
            t0 = []; t1 = []
            for _ in range(3):
                t0.append(d.time(k0, threads=2, min_time=0.03)); t1.append(d.time(k1, threads=2, min_time=0.03))
            w = r["weights"]
            rec = dict(suite=f.split("/")[-1], name=name, layout=layout, ic=w[0] // g, oc=oc, g=g, k=w[2:],
                       s=r["strides"],
                       default=k0.name, alt=k1.name, t_default=min(t0), t_alt=min(t1), ratio=min(t0) / min(t1))
            out.write(json.dumps(rec) + "\n"); out.flush()
