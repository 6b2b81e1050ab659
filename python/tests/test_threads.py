"""The GIL is released while a kernel runs, and kernels may be called from several Python threads."""
import threading
import time

import numpy as np

import deconvjit

# About 9 GFLOP: on the order of 100 ms on two cores, long enough that a thread shut out by the GIL for the
# whole call would be obvious against scheduling noise.
BIG = {"src": [1, 128, 256, 64], "weights": [4, 4, 128, 64], "strides": [2, 2], "data_format": "NXC",
       "weights_format": "XIO"}
SMALL = {"src": [2, 6, 9, 10], "weights": [6, 5, 3, 3], "strides": [2, 2], "pads_begin": [1, 0],
         "pads_end": [0, 1]}


def test_a_python_thread_runs_while_another_is_inside_the_kernel():
    k = deconvjit.compile(BIG)
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, k.src_shape).astype(np.float32)
    packed = k.pack(rng.uniform(-1, 1, k.weights_shape).astype(np.float32))
    out = np.empty(k.dst_shape, np.float32)
    k(x, packed, out=out)  # first touch of every page, outside the measurement
    window = []

    def worker():
        t0 = time.perf_counter()
        k(x, packed, out=out)
        window.extend([t0, time.perf_counter()])

    stamps = []
    thread = threading.Thread(target=worker)
    thread.start()
    while thread.is_alive():  # this thread's progress, stamp by stamp
        stamps.append(time.perf_counter())
    thread.join()
    t0, t1 = window
    inside = [s for s in stamps if t0 < s < t1]
    longest_gap = float(np.max(np.diff([t0] + inside + [t1])))
    # Holding the GIL, the kernel would stop this thread for the whole call: one gap of about t1 - t0.
    assert len(inside) > 100, f"{len(inside)} iterations during a {1e3 * (t1 - t0):.1f} ms call"
    assert longest_gap < 0.5 * (t1 - t0), \
        f"this thread stalled {1e3 * longest_gap:.1f} ms of a {1e3 * (t1 - t0):.1f} ms kernel call"


def test_threads_call_one_kernel_at_once():
    k = deconvjit.compile(SMALL)
    rng = np.random.default_rng(2)
    w = rng.uniform(-1, 1, k.weights_shape).astype(np.float32)
    packed = k.pack(w)
    inputs = [rng.uniform(-1, 1, k.src_shape).astype(np.float32) for _ in range(4)]
    want = [k(x, packed) for x in inputs]  # each checked against the reference below
    for x, y in zip(inputs, want):
        assert np.allclose(y, deconvjit.reference(SMALL, x, w), rtol=1e-5, atol=1e-5)
    errors = []
    start = threading.Barrier(len(inputs))

    def worker(i):
        out = np.empty(k.dst_shape, np.float32)
        start.wait()
        for r in range(50):
            got = k(inputs[i], packed if r % 2 else w, out=out)
            if not np.array_equal(got, want[i]):
                errors.append(f"thread {i}, round {r}: result differs")
                return

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
