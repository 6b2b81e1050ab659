#!/usr/bin/python3
"""Draws layers that are in no suite: the shapes decoders, GAN generators, vocoders and 3D segmenters use
(kernel/stride pairs, channel counts, groups, batches as they occur), sized to 2-400 MFLOP so that a race
of them takes minutes. Seeded: the same seed gives the same file. Used to check that rules fitted on
`realworld.jsonl` and `corpus.jsonl` hold on layers nobody tuned them for.

    /usr/bin/python3 tools/scripts/holdout_layers.py --seed 11 --count 48 > /tmp/holdout.jsonl
    build/tools/deconvjit bench --suite /tmp/holdout.jsonl --vs onednn --layout both --threads 2 --json
"""
import argparse
import json
import random

# (kernel, stride, pad) as published networks use them: k = s, k = 2s with pad s/2, odd k with
# output_padding, k = 3 at s = 1, long 1D kernels of vocoders.
KERNELS_2D = [(2, 2, 0), (4, 2, 1), (3, 2, 1), (3, 1, 1), (4, 4, 0), (8, 4, 2), (16, 8, 4), (5, 2, 2),
              (1, 1, 0), (7, 1, 3), (9, 3, 4), (6, 2, 2), (3, 3, 0)]
KERNELS_1D = [(16, 8, 4), (8, 4, 2), (4, 2, 1), (11, 5, 3), (10, 5, 3), (25, 4, 11), (2, 2, 0), (7, 1, 3),
              (20, 10, 5), (32, 16, 8)]
KERNELS_3D = [(2, 2, 0), (3, 2, 1), (4, 2, 1), (3, 1, 1)]
CHANNELS = [1, 2, 3, 4, 8, 12, 16, 19, 21, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192, 256, 320, 384, 512, 768]


def draw(rng, index):
    rank = rng.choices([1, 2, 3], weights=[3, 6, 2])[0]
    table = {1: KERNELS_1D, 2: KERNELS_2D, 3: KERNELS_3D}[rank]
    k, s, p = rng.choice(table)
    c_in = rng.choice(CHANNELS[4:])
    c_out = rng.choice(CHANNELS)
    groups = 1
    kind = rng.random()
    if kind < 0.12 and rank < 3:
        groups = c_in = c_out = rng.choice([32, 64, 96, 128, 256, 384])   # depthwise upsampling
    elif kind < 0.18:
        groups = rng.choice([2, 4, 8])
        c_in = max(groups, c_in // groups * groups)
        c_out = max(groups, c_out // groups * groups)
    out_pad = 1 if (k % 2 == 1 and s > 1 and 2 * p - k + s == 1 + 0 and rng.random() < 0.7) else 0
    batch = rng.choices([1, 2, 4, 8, 16], weights=[6, 2, 2, 1, 1])[0]
    flop_per_px = 2 * c_in * (c_out // groups) * k ** rank
    target = rng.uniform(2e6, 4e8) / batch
    side = max(2, int((target / flop_per_px) ** (1.0 / rank)))
    if rank == 1:
        side = min(side, 20000)
    elif rank == 2:
        side = min(side, 400)
        if rng.random() < 0.3:
            side = rng.choice([7, 8, 14, 16, 25, 28])      # small deep feature maps
    else:
        side = min(side, 64)
    spatial = [side] * rank
    if rank == 2 and rng.random() < 0.4:
        spatial = [side, max(2, int(side * rng.choice([1.5, 0.75, 2, 0.5])))]
    weights = [c_in, c_out // groups] + [k] * rank
    layer = {"name": f"ho{index:02d}", "src": [batch, c_in] + spatial, "weights": weights,
             "strides": [s] * rank, "pads_begin": [p] * rank, "pads_end": [p] * rank,
             "dilations": [1] * rank, "output_padding": [out_pad] * rank}
    if groups > 1:
        layer["groups"] = groups
        if groups == c_in:
            layer["weights"] = [groups, 1] + [k] * rank
    return layer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--count", type=int, default=48)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    for i in range(args.count):
        print(json.dumps(draw(rng, i)))


main()
