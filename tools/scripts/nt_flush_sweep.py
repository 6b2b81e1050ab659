#!/usr/bin/python3
"""Times nt_stores 0 against 1 on every suite layer (NCX, the best ISA; f32 or the type given) through the row buffer.

One JSON object per layer on stdout (docs/data/nt_flush_sweep_f32_2t.jsonl), a line per layer on stderr;
each kernel timed three times, interleaved, the best kept.

    PYTHONPATH=build/python DECONVJIT_TUNING_DB= DECONVJIT_CACHE_DIR= /usr/bin/python3 \
        tools/scripts/nt_flush_sweep.py [bf16|f16] > sweep.jsonl
"""
import sys, json, math, deconvjit as d
for f in ('tools/suites/corpus.jsonl', 'tools/suites/realworld.jsonl'):
    for l in open(f):
        if not l.strip(): continue
        r = json.loads(l); name = r.pop('name'); r['dtype'] = sys.argv[1] if len(sys.argv) > 1 else 'f32'
        try:
            k0 = d.compile(json.dumps(r), hints={"nt_stores": 0}); k1 = d.compile(json.dumps(r), hints={"nt_stores": 1})
        except Exception:
            continue
        pl = k0.plan if isinstance(k0.plan, dict) else json.loads(k0.plan)
        if pl.get('layout') not in ('ncx_row_buffer', 'row_buffer', 'ncx_src_in_place'): continue
        kd = d.compile(json.dumps(r))
        b = [1e9, 1e9]
        for _ in range(3):
            for i, k in enumerate((k0, k1)): b[i] = min(b[i], d.time(k, threads=2, min_time=0.1))
        dst = math.prod(kd.dst_shape) * kd.dtype.itemsize
        flops = 2 * math.prod(r['src']) * r['weights'][1] * math.prod(r['weights'][2:])
        rec = {"name": name, "kernel": k0.name, "default": kd.name, "dst_mb": dst / 1e6, "flops_per_byte": flops / dst,
               "plain_ms": b[0], "nt_ms": b[1], "speedup": b[0] / b[1]}
        print(json.dumps(rec), flush=True)
        print(f"{name:32s} {dst/1e6:8.2f} MB {flops/dst:8.1f} F/B  x{b[0]/b[1]:.3f}  {'NT' if '_nt_' in kd.name else ''}", file=sys.stderr, flush=True)
