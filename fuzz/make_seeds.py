#!/usr/bin/env python3
"""Writes the text and ONNX seed corpora in fuzz/corpus/ (run from anywhere; no dependencies).

fuzz_cache_entry's seeds are real entries, written by `deconvjit warm` (see tools/fuzz.sh --seeds)."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    path = os.path.join(HERE, "corpus", target, name)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


DESCRIPTORS = [
    {"src": [1, 4, 5, 5], "weights": [4, 3, 3, 3], "strides": [2, 2]},
    {"src": [1, 6, 7], "weights": [6, 2, 4], "strides": [3], "pads_begin": [-1], "pads_end": [2],
     "output_padding": [1]},
    {"src": [2, 5, 4, 3, 8], "weights": [2, 4, 3, 1, 2, 2], "strides": [1, 2, 2], "dilations": [2, 1, 1],
     "data_format": "NXC"},
    {"src": [1, 8, 6, 6], "weights": [8, 1, 3, 3], "groups": 8, "strides": [2, 2], "auto_pad": "same_upper",
     "output_shape": [12, 12]},
    {"src": [1, 6, 6, 4], "weights": [3, 3, 5, 4], "weights_format": "XIO", "data_format": "NXC",
     "auto_pad": "same_lower", "output_shape": [1, 13, 13, 5], "strides": [2, 2]},
    {"src": [1, 4, 3, 3], "weights": [2, 2, 3, 2, 2], "weights_format": "GOIX", "auto_pad": "valid",
     "output_shape": [5, 5], "dtype": "f32", "name": "grouped"},
    # The 16-bit types: direct with a channel tail (bf16: channel pairs with an odd last one), a 1-D NXC
    # layer in f16, and depthwise along x in f16.
    {"src": [1, 5, 6, 7], "weights": [5, 18, 3, 3], "strides": [2, 2], "pads_begin": [1, 0], "pads_end": [0, 1],
     "dtype": "bf16"},
    {"src": [2, 11, 9], "weights": [9, 3, 4], "strides": [3], "data_format": "NXC", "dtype": "f16"},
    {"src": [1, 8, 4, 9], "weights": [8, 1, 1, 3, 4], "strides": [2, 2], "dtype": "f16"},
]


def ir_seed():
    def port(pid, dims):
        return '<port id="%d" precision="FP32">%s</port>' % (pid, "".join("<dim>%d</dim>" % d for d in dims))

    def param(lid, name, dims):
        return ('<layer id="%d" name="%s" type="Parameter" version="opset1"><output>%s</output></layer>'
                % (lid, name, port(0, dims)))

    x = '<?xml version="1.0"?>\n<net name="seed" version="11"><layers>'
    x += param(0, "x", [1, 4, 5, 5]) + param(1, "w", [4, 3, 3, 3])
    x += ('<layer id="2" name="shape" type="Const" version="opset1"><data element_type="i64" shape="2" '
          'offset="8" size="16"/><output>%s</output></layer>' % port(0, [2]))
    x += ('<layer id="3" name="up" type="ConvolutionBackpropData" version="opset1"><data strides="2,2" '
          'pads_begin="0,0" pads_end="0,0" dilations="1,1" auto_pad="same_upper"/><input>%s%s%s</input>'
          '<output>%s</output></layer>' % (port(0, [1, 4, 5, 5]), port(1, [4, 3, 3, 3]), port(2, [2]),
                                           port(3, [1, 3, 2, 5])))
    x += param(4, "w2", [2, 2, 3, 3, 3])
    x += ('<layer id="5" name="grouped" type="GroupConvolutionBackpropData" version="opset1"><data '
          'strides="1,1" pads_begin="1,1" pads_end="1,1" dilations="1,1"/><input>%s%s</input>'
          '<output>%s</output></layer>' % (port(0, [1, 4, 5, 5]), port(1, [2, 2, 3, 3, 3]), port(2, [1, 6, 5, 5])))
    x += "</layers><edges>"
    for a, b, p in [(0, 3, 0), (1, 3, 1), (2, 3, 2), (0, 5, 0), (4, 5, 1)]:
        x += '<edge from-layer="%d" from-port="0" to-layer="%d" to-port="%d"/>' % (a, b, p)
    return x + "</edges></net>\n"


# Protocol buffers wire format, enough for an ONNX ModelProto.
def varint(n):
    out = b""
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def field(num, value):
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    data = value.encode() if isinstance(value, str) else value
    return varint(num << 3 | 2) + varint(len(data)) + data


def value_info(name, dims):
    shape = b"".join(field(1, field(1, d)) for d in dims) if dims is not None else b""
    tensor = field(1, 1) + (field(2, shape) if dims is not None else b"")
    return field(1, name) + field(2, field(1, tensor))


def onnx_seed(attrs, x_dims, w_dims):
    node = field(1, "x") + field(1, "w") + field(2, "y") + field(3, "up") + field(4, "ConvTranspose")
    for name, ints in attrs:
        if isinstance(ints, str):
            node += field(5, field(1, name) + field(4, ints) + field(20, 3))  # STRING
        elif isinstance(ints, int):
            node += field(5, field(1, name) + field(3, ints) + field(20, 2))  # INT
        else:
            node += field(5, field(1, name) + b"".join(field(8, v) for v in ints) + field(20, 7))  # INTS
    graph = field(1, node) + field(2, "g") + field(11, value_info("x", x_dims)) + field(11, value_info("w", w_dims))
    graph += field(12, value_info("y", None))
    return field(1, 7) + field(8, field(2, 13)) + field(7, graph)


def main():
    for i, d in enumerate(DESCRIPTORS):
        write("fuzz_descriptor", "seed%d.json" % i, json.dumps(d))
    write("fuzz_openvino_ir", "seed0.xml", ir_seed())
    write("fuzz_onnx", "seed0.onnx", onnx_seed([("strides", [2, 2])], [1, 4, 5, 5], [4, 3, 3, 3]))
    write("fuzz_onnx", "seed1.onnx", onnx_seed([("strides", [2]), ("pads", [1, 0]), ("dilations", [2])],
                                               [1, 2, 7], [2, 3, 3]))
    write("fuzz_onnx", "seed2.onnx", onnx_seed([("auto_pad", "SAME_UPPER"), ("strides", [2, 2]),
                                                ("output_shape", [10, 10]), ("group", 1)],
                                               [1, 4, 5, 5], [4, 3, 3, 3]))


if __name__ == "__main__":
    main()
