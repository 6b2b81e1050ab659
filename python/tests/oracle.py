"""An independent numpy formulation of the transposed convolution, for the tests.

Scatter form, straight from the definition: every input pixel i, through every kernel tap k, adds
x * w into the output at o = i*s - pad_begin + k*d (per spatial axis); taps that land outside the output
are dropped. It shares nothing with the library but the layouts' definitions (semantics.md section 1).
"""
import numpy as np


def out_size(x, k, s, d, pb, pe, op):
    """Explicit pads: semantics.md section 3."""
    return (x - 1) * s - pb - pe + d * (k - 1) + 1 + op


def _as_ncx(x, data_format):
    return np.moveaxis(x, -1, 1) if data_format == "nxc" else x


def _as_oix(w, weights_format, rank):
    """Weights as [C_IN, C_OUT/G, K...] whatever their format."""
    if weights_format == "xio":  # [K..., C_OUT/G, C_IN]
        return np.transpose(w, (rank + 1, rank) + tuple(range(rank)))
    if weights_format == "goix":  # [G, C_IN/G, C_OUT/G, K...]: the same memory as OIX
        return w.reshape((w.shape[0] * w.shape[1],) + w.shape[2:])
    return w


def _axis_ranges(size_in, size_out, s, d, k, pb):
    """Input indices i whose tap k lands inside the output, and where they land (both as slices)."""
    off = k * d - pb
    lo = max(0, -(off // s))  # smallest i with i*s + off >= 0
    hi = min(size_in - 1, (size_out - 1 - off) // s)
    if hi < lo:
        return None
    return slice(lo, hi + 1), slice(lo * s + off, hi * s + off + 1, s)


def transposed_conv(x, w, *, strides, dilations, pads_begin, out_spatial, groups=1,
                    data_format="ncx", weights_format="oix"):
    """Returns (y, abs_sum) in float64 in the data_format's layout: the result, and sum |x*w| per output
    element (what the rounding bound of a float dot product scales with)."""
    rank = x.ndim - 2
    xs = _as_ncx(x.astype(np.float64), data_format)
    ws = _as_oix(w.astype(np.float64), weights_format, rank)
    n, c_in = xs.shape[:2]
    c_out_g = ws.shape[1]
    c_in_g = c_in // groups
    y = np.zeros((n, c_out_g * groups) + tuple(out_spatial))
    mag = np.zeros_like(y)
    for g in range(groups):
        xg = xs[:, g * c_in_g:(g + 1) * c_in_g]
        wg = ws[g * c_in_g:(g + 1) * c_in_g]
        out_ch = slice(g * c_out_g, (g + 1) * c_out_g)
        for tap in np.ndindex(*ws.shape[2:]):
            ranges = [_axis_ranges(xs.shape[2 + a], out_spatial[a], strides[a], dilations[a], tap[a],
                                   pads_begin[a]) for a in range(rank)]
            if any(r is None for r in ranges):
                continue
            src = xg[(slice(None), slice(None)) + tuple(r[0] for r in ranges)]
            dst = (slice(None), out_ch) + tuple(r[1] for r in ranges)
            wt = wg[(slice(None), slice(None)) + tap]
            y[dst] += np.einsum("nc...,cd->nd...", src, wt)
            mag[dst] += np.einsum("nc...,cd->nd...", np.abs(src), np.abs(wt))
    if data_format == "nxc":
        y, mag = np.moveaxis(y, 1, -1), np.moveaxis(mag, 1, -1)
    return y, mag


def dot_length(c_in_per_group, kernel):
    """Terms in one output element's sum, plus one for the final rounding (runtime/tolerance.hpp)."""
    return c_in_per_group * int(np.prod(kernel)) + 1


def kernel_tolerance(n, abs_sum):
    """|float result - exact| <= gamma(n) * sum|x*w| + tiny: the worst case of any summation order."""
    nu = n * 2.0 ** -24
    return nu / (1 - nu) * abs_sum + n * np.finfo(np.float32).tiny


def rounding_tolerance(n, exact, abs_sum):
    """A double-precision result rounded once to float: half an ulp, plus two double sums' error."""
    return 2.0 ** -24 * np.abs(exact) + 2 * n * 2.0 ** -53 * abs_sum + np.finfo(np.float32).tiny


def assert_within(got, exact, tol, what):
    err = np.abs(got.astype(np.float64) - exact)
    bad = ~(err <= tol)  # NaN fails
    if bad.any():
        i = np.unravel_index(np.argmax(np.where(bad, err / tol, 0)), err.shape)
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} elements outside the tolerance; worst "
                             f"at {i}: got {got[i]!r}, want {exact[i]!r}, tolerance {tol[i]!r}")
