"""deconvjit.peak() and Kernel.time(): the CLI's `peak` and `bench` figures, from the same code."""
import json
import math
import os
import subprocess

import numpy as np
import pytest

import deconvjit

DESC = {"src": [1, 16, 12, 12], "weights": [16, 8, 3, 3], "strides": [2, 2]}


def test_peak_has_the_fields_of_the_cli():
    p = deconvjit.peak(min_time=0.005)
    assert p["threads"] >= 1 and p["avx512"] == deconvjit.isa_available("avx512_core")
    assert p["ymm_fma_gflops_1t"] > 0 and p["triad_gbps_nt"] > 0 and p["seconds"] > 0
    if not p["avx512"]:
        assert p["zmm_fma_gflops_1t"] == 0
    cli = os.environ.get("DECONVJIT_CLI")  # set by CTest
    if not cli:
        pytest.skip("DECONVJIT_CLI is not set: no CLI to compare with")
    line = subprocess.run([cli, "peak", "--json", "--min-time", "0.005"], check=True, capture_output=True,
                          text=True).stdout
    assert list(json.loads(line)) == list(p)


def test_time_returns_a_median_in_milliseconds():
    k = deconvjit.compile(DESC)
    ms = k.time(min_time=0.01, threads=1)
    assert math.isfinite(ms) and 0 < ms < 1000
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, k.src_shape).astype(np.float32)
    w = rng.uniform(-1, 1, k.weights_shape).astype(np.float32)
    for args in ((x, w), (x, k.pack(w)), (None, w), (x, None)):
        assert 0 < deconvjit.time(k, *args, min_time=0.005) < 1000
    with pytest.raises(deconvjit.InvalidArgumentError, match="x: shape"):
        k.time(x[0])
