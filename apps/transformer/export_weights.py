#!/usr/bin/python3
"""Write a PyTorch nn.TransformerEncoder's weights in the format transformer_encoder --weights reads.

Format (little-endian): the 8 bytes "CORAENC1"; five int32: layers, hidden, heads, ff, activation
(0 ReLU, 1 GELU); then per layer these float32 arrays, matrices row-major [in, out] (the transpose
of nn.Linear.weight):
    wqkv [hidden, 3 hidden] (columns: q | k | v), bqkv [3 hidden], wo [hidden, hidden], bo [hidden],
    ln1_gamma, ln1_beta [hidden], w1 [hidden, ff], b1 [ff], w2 [ff, hidden], b2 [hidden],
    ln2_gamma, ln2_beta [hidden].
The encoder must be post-LN (norm_first=False), head dim 64, ff a multiple of 64, ReLU or GELU.

As a program: writes a randomly initialised encoder (for trying the format):
    export_weights.py OUT.bin [--layers 6] [--hidden 512] [--heads 8] [--ff 2048] [--gelu] [--seed 0]
"""
import argparse
import struct
import sys

import torch


def encoder_config(encoder):
    layer = encoder.layers[0]
    hidden = layer.self_attn.embed_dim
    heads = layer.self_attn.num_heads
    ff = layer.linear1.out_features
    act = layer.activation
    name = act if isinstance(act, str) else getattr(act, "__name__", type(act).__name__)
    if "gelu" in name.lower():
        activation = 1
    elif "relu" in name.lower():
        activation = 0
    else:
        raise ValueError(f"unsupported activation {name}; cora's encoder runs ReLU or GELU")
    if getattr(layer, "norm_first", False):
        raise ValueError("cora's encoder is post-LN: build the layers with norm_first=False")
    if hidden != 64 * heads or ff % 64 != 0:
        raise ValueError(f"hidden {hidden}, heads {heads}, ff {ff}: cora needs head dim 64 and ff a multiple of 64")
    return len(encoder.layers), hidden, heads, ff, activation


def write_weights(encoder, path):
    layers, hidden, heads, ff, activation = encoder_config(encoder)
    with open(path, "wb") as f:
        f.write(b"CORAENC1")
        f.write(struct.pack("<5i", layers, hidden, heads, ff, activation))

        def put(t):
            f.write(t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes())

        for layer in encoder.layers:
            att = layer.self_attn
            put(att.in_proj_weight.t())
            put(att.in_proj_bias)
            put(att.out_proj.weight.t())
            put(att.out_proj.bias)
            put(layer.norm1.weight)
            put(layer.norm1.bias)
            put(layer.linear1.weight.t())
            put(layer.linear1.bias)
            put(layer.linear2.weight.t())
            put(layer.linear2.bias)
            put(layer.norm2.weight)
            put(layer.norm2.bias)


def make_encoder(layers, hidden, heads, ff, gelu, seed):
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(hidden, heads, ff, dropout=0.0, activation="gelu" if gelu else "relu",
                                             batch_first=True, norm_first=False)
    return torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--ff", type=int, default=2048)
    p.add_argument("--gelu", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    try:
        write_weights(make_encoder(a.layers, a.hidden, a.heads, a.ff, a.gelu, a.seed), a.out)
    except (ValueError, OSError) as e:
        print(f"export_weights.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
