"""bf16 and f16 problems from Python: numpy float16 arrays for f16, uint16 arrays of bf16 bits for bf16
(numpy has no bfloat16), to_bf16 / from_bf16, the reference in every type, and the kernels. The tests that
need a kernel run on both ISAs this CPU has."""
import numpy as np
import pytest

import deconvjit
import oracle
from test_results import geometry

DESC = {"src": [2, 6, 5, 4], "weights": [6, 4, 3, 3], "strides": [2, 2], "pads_begin": [1, 0],
        "pads_end": [0, 1]}
NXC = {"src": [1, 4, 5, 8], "weights": [3, 3, 5, 8], "strides": [2, 1], "data_format": "NXC",
       "weights_format": "XIO"}
NUMPY = {"f16": np.float16, "bf16": np.uint16}
SIGNIFICAND = {"f16": 11, "bf16": 8}  # bits, the hidden one included
SMALLEST = {"f16": 2.0 ** -24, "bf16": 2.0 ** -133}  # the smallest subnormal


def typed(values, dtype):
    """float64 values rounded once into the type, in the form its problems take."""
    return deconvjit.to_bf16(values) if dtype == "bf16" else values.astype(np.float16)


def widened(a, dtype):
    return (deconvjit.from_bf16(a) if dtype == "bf16" else a.astype(np.float32)).astype(np.float64)


def operands(desc, dtype, seed=7):
    rng = np.random.default_rng(seed)
    g = geometry(desc)
    x = typed(rng.uniform(-1, 1, desc["src"]), dtype)
    w = typed(rng.uniform(-1, 1, desc["weights"]), dtype)
    return g, x, w


def exact(desc, g, x, w, dtype):
    return oracle.transposed_conv(widened(x, dtype), widened(w, dtype), strides=g["strides"],
                                  dilations=g["dilations"], pads_begin=g["pads_begin"], out_spatial=g["out"],
                                  groups=g["groups"], data_format=g["data_format"],
                                  weights_format=g["weights_format"])


def half_ulp(dtype, y):
    """Half a unit in the last place of the type at |y| (a bound on one correct rounding)."""
    return np.maximum(np.abs(y) * 2.0 ** -SIGNIFICAND[dtype], SMALLEST[dtype] / 2)


def test_to_bf16_rounds_to_nearest_even():
    one = 0x3F80
    ties = np.array([1.0, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, -(1 + 2.0 ** -8), 1 + 2.0 ** -8 + 2.0 ** -20],
                    np.float32)
    assert deconvjit.to_bf16(ties).tolist() == [one, one, one + 2, 0x8000 | one, one + 1]
    special = np.array([np.inf, -np.inf, np.finfo(np.float32).max, 0.0, -0.0, 2.0 ** -133], np.float32)
    assert deconvjit.to_bf16(special).tolist() == [0x7F80, 0xFF80, 0x7F80, 0, 0x8000, 1]
    assert np.isnan(deconvjit.from_bf16(deconvjit.to_bf16(np.array([np.nan], np.float32))))[0]


def test_float64_is_rounded_once():
    # Just above a tie of bf16, but a tie once rounded to float32 (the 2^-30 is lost): rounding twice
    # would give the even neighbour below.
    x = 1 + 2.0 ** -8 + 2.0 ** -30
    assert deconvjit.to_bf16(np.array([x]))[0] == 0x3F81
    assert deconvjit.to_bf16(np.array([x], np.float32))[0] == 0x3F80
    assert deconvjit.to_bf16(np.array([1.5], np.float16))[0] == 0x3FC0


def test_bf16_round_trip_keeps_shape_and_is_exact_on_bf16_values():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    bits = deconvjit.to_bf16(x)
    assert bits.dtype == np.uint16 and bits.shape == x.shape
    back = deconvjit.from_bf16(bits)
    assert back.dtype == np.float32 and back.shape == x.shape
    assert np.all(np.abs(back - x) <= np.abs(x) * 2.0 ** -8)
    assert np.array_equal(deconvjit.to_bf16(back), bits)
    assert np.array_equal(deconvjit.from_bf16(bits[:, ::2]), back[:, ::2])  # strided views are read right


def test_bf16_helpers_name_the_type_they_expect():
    with pytest.raises(ValueError, match="to_bf16: dtype int32, expected float32"):
        deconvjit.to_bf16(np.zeros(3, np.int32))
    with pytest.raises(ValueError, match="from_bf16: dtype float32, expected uint16 holding bf16 bits"):
        deconvjit.from_bf16(np.zeros(3, np.float32))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_arrays_of_another_type_are_value_errors_naming_the_expected_one(dtype):
    desc = dict(DESC, dtype=dtype)
    g, x, w = operands(desc, dtype)
    want = "float16 \\(f16\\)" if dtype == "f16" else "uint16 holding bf16 bits \\(bf16\\)"
    with pytest.raises(ValueError, match=f"x: dtype float32, the descriptor's data needs {want}"):
        deconvjit.reference(desc, x.astype(np.float32), w)
    other = np.zeros(desc["weights"], np.float16 if dtype == "bf16" else np.uint16)
    with pytest.raises(ValueError, match=f"w: dtype {other.dtype}, the descriptor's data needs {want}"):
        deconvjit.reference(desc, x, other)


@pytest.mark.parametrize("desc", [DESC, NXC], ids=["ncx", "nxc_xio"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_reference_is_the_exact_result_rounded_once(dtype, desc):
    desc = dict(desc, dtype=dtype)
    g, x, w = operands(desc, dtype)
    y = deconvjit.reference(desc, x, w)
    assert y.dtype == NUMPY[dtype] and list(y.shape) == g["dst"]
    want, mag = exact(desc, g, x, w, dtype)
    n = oracle.dot_length(g["c_in_g"], g["kernel"])
    oracle.assert_within(widened(y, dtype), want, half_ulp(dtype, want) + 2 * n * 2.0 ** -53 * mag, "reference")


@pytest.mark.parametrize("desc", [DESC, NXC], ids=["ncx", "nxc_xio"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_kernel_returns_the_same_type_within_the_tolerance(dtype, desc):
    desc = dict(desc, dtype=dtype)
    g, x, w = operands(desc, dtype, seed=11)
    k = deconvjit.compile(desc)
    assert k.dtype == NUMPY[dtype]
    y = k(x, w)
    assert y.dtype == NUMPY[dtype] and y.shape == k.dst_shape
    out = np.zeros(k.dst_shape, NUMPY[dtype])
    assert k(x, k.pack(w), out=out) is out and np.array_equal(out, y)
    want, mag = exact(desc, g, x, w, dtype)
    # f32 sums (any order) rounded once into the type: the f32 bound plus half an ulp of the output type,
    # doubled for the rounding of an inexact f32 sum that lands near a tie.
    n = oracle.dot_length(g["c_in_g"], g["kernel"])
    tol = oracle.kernel_tolerance(n, mag) + 2 * half_ulp(dtype, want)
    oracle.assert_within(widened(y, dtype), want, tol, f"{dtype} kernel")
    with pytest.raises(ValueError, match="x: dtype float32"):
        k(x.astype(np.float32), w)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_time_runs_on_operands_of_the_type(dtype):
    k = deconvjit.compile(dict(DESC, dtype=dtype))
    assert 0 < k.time(min_time=0.005, threads=1) < 1000
    _, x, w = operands(dict(DESC, dtype=dtype), dtype)
    assert 0 < k.time(x, w, min_time=0.005, threads=1) < 1000


def test_peak_reports_the_half_types_arithmetic_only_where_the_cpu_has_it():
    p = deconvjit.peak(min_time=0.005)
    for flag, keys in (("avx512_fp16", ("zmm_f16_fma_gflops_1t", "zmm_f16_fma_gflops_nt")),
                       ("avx512_bf16", ("zmm_bf16_dot_gflops_1t", "zmm_bf16_dot_gflops_nt"))):
        assert isinstance(p[flag], bool)
        assert not p[flag] or p["avx512"]
        for key in keys:
            assert (p[key] > 0) == p[flag], (key, p)
