"""Kernel results against deconvjit.reference and against the numpy oracle written in oracle.py."""
import json

import numpy as np
import pytest

import deconvjit
import oracle

# 1D, 2D and 3D; NCX and NXC; OIX, XIO and group-form weights; groups and depthwise; strides, dilations,
# signed pads and output_padding.
CASES = {
    "1d_ncx_stride_pad": dict(src=[2, 3, 7], weights=[3, 5, 3], strides=[2], pads_begin=[1], pads_end=[0]),
    "1d_nxc_xio_dilated_op": dict(src=[1, 9, 8], weights=[4, 6, 8], strides=[3], dilations=[2],
                                  output_padding=[1], data_format="NXC", weights_format="XIO"),
    "1d_ncx_batch3_dilation3": dict(src=[3, 5, 11], weights=[5, 4, 2], dilations=[3]),
    "2d_ncx_groups2": dict(src=[1, 8, 6, 5], weights=[8, 3, 3, 3], groups=2, strides=[2, 1],
                           pads_begin=[1, 0], pads_end=[0, 1]),
    "2d_nxc_depthwise_goix_op": dict(src=[2, 7, 6, 16], weights=[16, 1, 1, 3, 3], strides=[2, 2],
                                     pads_begin=[1, 1], pads_end=[1, 1], output_padding=[1, 1],
                                     data_format="NXC", weights_format="GOIX"),
    "2d_nxc_xio_wide": dict(src=[1, 5, 7, 32], weights=[3, 3, 24, 32], strides=[2, 2], dilations=[1, 2],
                            data_format="NXC", weights_format="XIO"),
    "2d_ncx_k4_s2": dict(src=[1, 16, 9, 11], weights=[16, 20, 4, 4], strides=[2, 2], pads_begin=[1, 1],
                         pads_end=[1, 1]),
    "2d_ncx_1x1": dict(src=[2, 24, 5, 6], weights=[24, 17, 1, 1]),
    "2d_ncx_negative_pads": dict(src=[1, 3, 4, 4], weights=[3, 2, 3, 3], strides=[2, 2],
                                 pads_begin=[-1, 0], pads_end=[0, -1]),
    "3d_ncx_op": dict(src=[1, 4, 3, 4, 5], weights=[4, 6, 2, 3, 3], strides=[2, 2, 1], pads_begin=[0, 1, 1],
                      pads_end=[1, 0, 1], output_padding=[1, 0, 0]),
    "3d_nxc_goix_groups4": dict(src=[1, 3, 3, 3, 8], weights=[4, 2, 3, 2, 2, 2], strides=[1, 2, 2],
                                dilations=[2, 1, 1], data_format="NXC", weights_format="GOIX"),
}

ISAS = [isa for isa in ("avx2", "avx512_core") if deconvjit.isa_available(isa)]


def geometry(desc):
    """What the test derives from a descriptor on its own: rank, kernel, groups, and the output shape."""
    src, w = desc["src"], desc["weights"]
    rank = len(src) - 2
    fmt, wfmt = desc.get("data_format", "NCX").lower(), desc.get("weights_format", "OIX").lower()
    if wfmt == "xio":
        kernel, c_out_g, groups = w[:rank], w[rank], desc.get("groups", 1)
    elif wfmt == "goix":
        kernel, c_out_g, groups = w[3:], w[2], w[0]
    else:
        kernel, c_out_g, groups = w[2:], w[1], desc.get("groups", 1)
    c_in = src[-1] if fmt == "nxc" else src[1]
    spatial = src[1:-1] if fmt == "nxc" else src[2:]
    get = lambda key, default: desc.get(key, [default] * rank)  # noqa: E731
    g = dict(rank=rank, kernel=kernel, groups=groups, c_in_g=c_in // groups, data_format=fmt,
             weights_format=wfmt, strides=get("strides", 1), dilations=get("dilations", 1),
             pads_begin=get("pads_begin", 0), pads_end=get("pads_end", 0), op=get("output_padding", 0))
    g["out"] = [oracle.out_size(spatial[a], kernel[a], g["strides"][a], g["dilations"][a], g["pads_begin"][a],
                                g["pads_end"][a], g["op"][a]) for a in range(rank)]
    c_out = c_out_g * groups
    g["dst"] = [src[0]] + (g["out"] + [c_out] if fmt == "nxc" else [c_out] + g["out"])
    return g


def operands(desc, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, desc["src"]).astype(np.float32)
    w = rng.uniform(-1, 1, desc["weights"]).astype(np.float32)
    return x, w


def exact(desc, x, w):
    g = geometry(desc)
    y, mag = oracle.transposed_conv(x, w, strides=g["strides"], dilations=g["dilations"],
                                    pads_begin=g["pads_begin"], out_spatial=g["out"], groups=g["groups"],
                                    data_format=g["data_format"], weights_format=g["weights_format"])
    return y, mag, oracle.dot_length(g["c_in_g"], g["kernel"])


@pytest.mark.parametrize("name", CASES)
def test_shape_matches_the_formula(name):
    desc = CASES[name]
    got = deconvjit.shape(desc)
    assert got["dst"] == geometry(desc)["dst"]
    assert list(got) == ["dst", "pads_begin", "pads_end"]  # the fields of `deconvjit shape`
    assert deconvjit.shape(json.dumps(desc)) == got


@pytest.mark.parametrize("name", CASES)
def test_reference_matches_numpy(name):
    desc = CASES[name]
    x, w = operands(desc, seed=len(name))
    want, mag, n = exact(desc, x, w)
    ref = deconvjit.reference(desc, x, w)
    assert ref.dtype == np.float32 and list(ref.shape) == geometry(desc)["dst"]
    oracle.assert_within(ref, want, oracle.rounding_tolerance(n, want, mag), "reference vs numpy")


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", CASES)
def test_kernel_matches_numpy_and_reference(name, isa):
    desc = CASES[name]
    k = deconvjit.compile(desc, isa=isa, hints={"isa": isa})  # that ISA's code, not only its cap
    assert k.isa == isa and k.name.endswith(isa)
    x, w = operands(desc, seed=len(name) + 1)
    want, mag, n = exact(desc, x, w)
    y = k(x, w)
    assert y.dtype == np.float32 and y.shape == tuple(geometry(desc)["dst"]) == k.dst_shape
    tol = oracle.kernel_tolerance(n, mag)
    oracle.assert_within(y, want, tol, f"{k.name} vs numpy")
    ref = deconvjit.reference(desc, x, w)
    oracle.assert_within(y, ref.astype(np.float64), tol + oracle.rounding_tolerance(n, want, mag),
                         f"{k.name} vs reference")


@pytest.mark.parametrize("name", ["2d_nxc_xio_wide", "3d_ncx_op"])
def test_packed_weights_reused_and_out(name):
    desc = CASES[name]
    k = deconvjit.compile(desc)
    packed = k.pack(operands(desc, seed=5)[1])
    assert packed.kernel_name == k.name and packed.nbytes > 0
    out = np.full(k.dst_shape, np.nan, dtype=np.float32)
    for seed in (6, 7):  # two different inputs through the same packed weights and the same `out`
        x, w = operands(desc, seed=seed)
        want, mag, n = exact(desc, x, operands(desc, seed=5)[1])
        got = k(x, packed, out=out)
        assert got is out
        oracle.assert_within(out, want, oracle.kernel_tolerance(n, mag), f"seed {seed}")


def test_strided_and_fortran_inputs_give_the_dense_result():
    desc = CASES["2d_ncx_k4_s2"]
    k = deconvjit.compile(desc)
    x, w = operands(desc, seed=9)
    dense = k(x, w)
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), np.float32)
    wide[..., ::2] = x  # a strided view holding the same values
    assert not wide[..., ::2].flags.c_contiguous
    assert np.array_equal(k(wide[..., ::2], np.asfortranarray(w)), dense)
    assert np.array_equal(deconvjit.reference(desc, wide[..., ::2], np.asfortranarray(w)),
                          deconvjit.reference(desc, x, w))


def test_hints_reach_the_plan():
    desc = CASES["2d_nxc_xio_wide"]
    base = deconvjit.compile(desc).plan
    ur_w = 2 if base["ur_w"] != 2 else 3
    k = deconvjit.compile(desc, hints={"ur_w": ur_w, "algorithm": base["algorithm"], "x_halo": None})
    assert k.plan["ur_w"] == ur_w
    assert deconvjit.compile(desc, hints=json.dumps({"ur_w": ur_w})).plan["ur_w"] == ur_w
    x, w = operands(desc, seed=3)
    want, mag, n = exact(desc, x, w)
    oracle.assert_within(k(x, w), want, oracle.kernel_tolerance(n, mag), k.name)


def test_kernel_attributes():
    desc = CASES["2d_ncx_groups2"]
    k = deconvjit.compile(desc)
    assert k.plan["name"] == k.name
    assert k.code_size > 0
    p = k.problem
    assert (p["src"], p["weights"], p["dst"]) == (k.src_shape, k.weights_shape, k.dst_shape)
    assert p["groups"] == 2 and p["dtype"] == "f32" and p["data_format"] == "NCX"
    assert k.src_shape == tuple(desc["src"]) and k.dtype == np.float32
    assert p["flops"] == 2 * 1 * 8 * 3 * (6 * 5) * 9  # 2 * N * C_IN * C_OUT/G * prod(in) * prod(kernel)
    assert k.name in repr(k)


def test_descriptor_values_may_be_numpy():
    x = np.zeros((1, 4, 5, 5), np.float32)
    desc = {"src": x.shape, "weights": np.array([4, 2, 3, 3]), "strides": [np.int64(2), np.int32(2)]}
    assert deconvjit.shape(desc)["dst"] == [1, 2, 11, 11]


def test_plans_compile_to_their_kernels_and_match_the_reference():
    desc = {"src": [1, 8, 3, 4], "weights": [8, 12, 2, 2], "strides": [2, 2]}
    cands = deconvjit.plans(desc)
    assert len(cands) > 10
    assert all(a["model_ms"] <= b["model_ms"] for a, b in zip(cands, cands[1:]))
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (1, 8, 3, 4)).astype(np.float32)
    w = rng.uniform(-1, 1, (8, 12, 2, 2)).astype(np.float32)
    want = deconvjit.reference(desc, x, w)
    for c in cands[:: max(1, len(cands) // 25)]:
        k = deconvjit.compile(desc, hints=c["hints"])
        assert k.name == c["kernel"]
        assert k.plan["choices"] == c["hints"]
        np.testing.assert_allclose(k(x, w), want, rtol=1e-5, atol=1e-5)


def test_plans_within_a_time_limit_are_some_of_the_full_space():
    desc = {"src": [1, 8, 3, 4], "weights": [8, 12, 2, 2], "strides": [2, 2]}
    every = {json.dumps(c["hints"], sort_keys=True) for c in deconvjit.plans(desc)}
    cut = deconvjit.plans(desc, max_seconds=1e-9)
    assert 0 < len(cut) < len(every)
    assert all(json.dumps(c["hints"], sort_keys=True) in every for c in cut)
    assert {c["hints"]["algorithm"] for c in cut} == {json.loads(h)["algorithm"] for h in every}
