"""No reference or memory leak over 10^4 calls, on success and on error paths."""
import gc
import os
import sys

import numpy as np
import pytest

import deconvjit

DESC = {"src": [1, 8, 16, 16], "weights": [8, 4, 3, 3], "strides": [2, 2]}  # dst: 17 KiB per call
CALLS = 10_000
RSS_BOUND = 4 << 20  # a leaked output array per call alone would be 170 MB


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_no_leak_over_ten_thousand_calls():
    k = deconvjit.compile(DESC)
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, k.src_shape).astype(np.float32)
    w = rng.uniform(-1, 1, k.weights_shape).astype(np.float32)
    x_strided = np.repeat(x, 2, axis=-1)[..., ::2]  # copied to contiguous memory on every call
    x_bad = x.astype(np.float64)
    packed = k.pack(w)
    out = np.empty(k.dst_shape, np.float32)
    watched = (x, w, x_strided, x_bad, packed, out, k)

    def one_round():
        k(x, packed)
        k(x_strided, w, out=out)
        deconvjit.reference(DESC, x, w)
        deconvjit.compile(DESC)  # a cache hit
        deconvjit.shape(DESC)
        k.pack(w)
        with pytest.raises(deconvjit.InvalidArgumentError):
            k(x_bad, packed)
        with pytest.raises(deconvjit.InvalidArgumentError):
            k(x, packed, out=x_bad)

    for _ in range(1000):  # allocator pools and caches reach their steady state
        one_round()
    gc.collect()
    refs = [sys.getrefcount(o) for o in watched]
    rss = rss_bytes()
    for _ in range(CALLS):
        one_round()
    gc.collect()
    assert [sys.getrefcount(o) for o in watched] == refs
    growth = rss_bytes() - rss
    assert growth < RSS_BOUND, f"RSS grew by {growth / 2**20:.1f} MiB over {CALLS} rounds"
