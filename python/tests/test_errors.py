"""Errors: one exception class per deconvjit::Error::Kind, and clear messages for wrong arrays."""
import numpy as np
import pytest

import deconvjit

DESC = {"src": [1, 4, 5, 5], "weights": [4, 3, 3, 3], "strides": [2, 2]}
KINDS = [  # Error::Kind order, with the built-in base a Python user would catch
    ("InvalidDescriptorError", ValueError),
    ("UnsupportedError", None),
    ("IsaUnavailableError", None),
    ("InvalidArgumentError", ValueError),
    ("IoError", OSError),
    ("InternalError", None),
]


@pytest.fixture(scope="module")
def kernel():
    return deconvjit.compile(DESC)


def arrays(k):
    return np.zeros(k.src_shape, np.float32), np.zeros(k.weights_shape, np.float32)


@pytest.mark.parametrize("index", range(len(KINDS)))
def test_each_kind_raises_its_class(index):
    name, builtin = KINDS[index]
    cls = getattr(deconvjit, name)
    assert issubclass(cls, deconvjit.Error) and issubclass(deconvjit.Error, Exception)
    with pytest.raises(cls, match="the message") as info:
        deconvjit._raise_error(index, "the message")
    assert type(info.value) is cls and cls.__module__ == "deconvjit"
    if builtin:
        assert isinstance(info.value, builtin)
    others = [getattr(deconvjit, n) for n, _ in KINDS if n != name]
    assert not any(isinstance(info.value, o) for o in others)


@pytest.mark.parametrize("desc,match", [
    ({"src": [1, 4, 5, 5]}, "missing required field 'weights'"),
    ({"src": [1, 4, 5, 5], "weights": [3, 3, 3, 3]}, "weights"),
    ({"src": [1, 4, 5, 5], "weights": [4, 3, 3, 3], "stride": [2, 2]}, "stride"),
    ('{"src": [1, 4, 5, 5], ', ""),
    ("[1, 2]", "object"),
])
def test_invalid_descriptor(desc, match):
    for call in (deconvjit.shape, deconvjit.compile):
        with pytest.raises(deconvjit.InvalidDescriptorError, match=match):
            call(desc)
    with pytest.raises(ValueError):
        deconvjit.shape(desc)


def test_desc_of_another_type_is_a_type_error():
    with pytest.raises(TypeError, match="dict or a JSON string"):
        deconvjit.shape(42)


@pytest.mark.parametrize("hints,match", [
    ({"ur_v": 2}, "unknown field 'ur_v'.*ur_w"),
    ({"ur_w": 1.5}, "'ur_w' must be an integer"),
    ({"ur_w": True}, "'ur_w' must be an integer"),
    ({"algorithm": 3}, "'algorithm' must be a string"),
    ({"ur_w": 2 ** 40}, "out of range"),
    ({"algorithm": "bogus"}, "bogus"),
    ("{", "not valid JSON"),
    ("[1]", "dict or a JSON object"),
])
def test_bad_hints(hints, match):
    with pytest.raises(deconvjit.InvalidArgumentError, match=match):
        deconvjit.compile(DESC, hints=hints)


def test_isa():
    with pytest.raises(deconvjit.InvalidArgumentError, match="unknown ISA 'sse'"):
        deconvjit.compile(DESC, isa="sse")
    assert deconvjit.compile(DESC, isa="best").isa in ("avx2", "avx512_core")
    if not deconvjit.isa_available("avx512_core"):
        with pytest.raises(deconvjit.IsaUnavailableError):
            deconvjit.compile(DESC, isa="avx512_core")


def test_wrong_arrays_name_the_argument(kernel):
    x, w = arrays(kernel)
    cases = [
        ((x.astype(np.float64), w), "x: dtype float64, the descriptor's data needs float32"),
        ((x, w.astype(np.float16)), "w: dtype float16"),
        ((x[:, :2], w), r"x: shape \(1, 2, 5, 5\), the descriptor needs \(1, 4, 5, 5\)"),
        ((x, w[None]), r"w: shape \(1, 4, 3, 3, 3\)"),
        ((x.reshape(-1), w), r"x: shape \(100,\)"),
        ((x.tolist(), w), "x: dtype float64"),
        ((x, object()), "w: dtype object"),
    ]
    for args, match in cases:
        with pytest.raises(deconvjit.InvalidArgumentError, match=match):
            kernel(*args)
    with pytest.raises(deconvjit.InvalidArgumentError, match="w: dtype int64"):
        kernel.pack(w.astype(np.int64))
    with pytest.raises(deconvjit.InvalidArgumentError, match=r"x: shape"):
        deconvjit.reference(DESC, x[0], w)


def test_bad_out_is_rejected_before_anything_is_written(kernel):
    x, w = arrays(kernel)
    x += 1
    w += 1
    good = np.zeros(kernel.dst_shape, np.float32)
    readonly = np.full(kernel.dst_shape, 7, np.float32)
    readonly.flags.writeable = False
    cases = [
        (np.full(kernel.dst_shape, 7, np.float64), "out: dtype float64"),
        (np.full((1, 3, 11, 10), 7, np.float32), r"out: shape \(1, 3, 11, 10\)"),
        (np.full(kernel.dst_shape[::-1], 7, np.float32).T, "out: must be C-contiguous"),
        (readonly, "out: is read-only"),
        ([0.0] * 363, "out: expected a numpy array"),
    ]
    for out, match in cases:
        with pytest.raises(deconvjit.InvalidArgumentError, match=match):
            kernel(x, w, out=out)
        if isinstance(out, np.ndarray):
            assert (out == 7).all()
    strided = np.full((1, 3, 11, 22), 7, np.float32)[..., ::2]
    with pytest.raises(deconvjit.InvalidArgumentError, match="C-contiguous"):
        kernel(x, w, out=strided)
    assert (strided == 7).all()
    assert kernel(x, w, out=good) is good and good.any()


def test_out_may_not_overlap_an_input():
    desc = {"src": [1, 4, 8], "weights": [4, 4, 1]}  # dst has the shape of src
    k = deconvjit.compile(desc)
    x = np.ones((1, 4, 8), np.float32)
    with pytest.raises(deconvjit.InvalidArgumentError, match="out: shares memory with an input"):
        k(x, np.ones((4, 4, 1), np.float32), out=x)
    assert (x == 1).all()


def test_packed_weights_of_another_kernel(kernel):
    other = deconvjit.compile({"src": [1, 4, 5, 5], "weights": [4, 5, 3, 3]})
    packed = other.pack(np.zeros(other.weights_shape, np.float32))
    with pytest.raises(deconvjit.InvalidArgumentError, match="packed for kernel"):
        kernel(arrays(kernel)[0], packed)


def test_timing_and_peak_arguments(kernel):
    with pytest.raises(deconvjit.InvalidArgumentError, match="min_time"):
        kernel.time(min_time=-1)
    with pytest.raises(deconvjit.InvalidArgumentError, match="threads"):
        deconvjit.time(kernel, threads=-2)
    with pytest.raises(deconvjit.InvalidArgumentError, match="min_time"):
        deconvjit.peak(min_time=0)
    with pytest.raises(TypeError):
        deconvjit.time("not a kernel")
