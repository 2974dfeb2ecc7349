#!/usr/bin/python3
"""Write a pruned feed-forward block's weights for `pruned_ff --weights FILE`, in the BSR layout
PyTorch gives: the magic "CORABSR1", four little-endian int32 (hidden, ff, block, has_bias), then for
W1 (nn.Linear(hidden, ff).weight) and W2 (nn.Linear(ff, hidden).weight), from
weight.to_sparse_bsr((block, block)): int32 nnzb, int32 crow_indices, int32 col_indices, float32
values [nnzb, block, block]; then, with biases, float32 b1 [ff] and b2 [hidden].

As a script it prunes a random FF block to a block density and writes it:
    export_bsr.py OUT [--hidden 768] [--ff 3072] [--block 32] [--density 0.25] [--no-bias] [--seed 0]
As a module: make_pruned_ff(...) returns the two nn.Linear layers, write_bsr_weights(...) writes them
(your own pruned model's layers work the same way)."""
import argparse
import struct
import sys
import warnings

import torch

# PyTorch 1.13 warns that BSR support is in beta on every conversion; the layout itself is stable.
warnings.filterwarnings("ignore", message="Sparse BSR tensor support is in beta")


def make_pruned_ff(hidden, ff, block, density, bias=True, seed=0):
    """Two nn.Linear layers whose weights keep a random `density` of their block x block blocks."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    lin1, lin2 = torch.nn.Linear(hidden, ff, bias=bias), torch.nn.Linear(ff, hidden, bias=bias)
    with torch.no_grad():
        for lin in (lin1, lin2):
            rows, cols = lin.weight.shape
            mask = (torch.rand(rows // block, cols // block, generator=gen) < density).float()
            lin.weight.mul_(mask.repeat_interleave(block, 0).repeat_interleave(block, 1))
    return lin1, lin2


def write_bsr_weights(lin1, lin2, block, path):
    hidden, ff = lin1.in_features, lin1.out_features
    if lin2.in_features != ff or lin2.out_features != hidden:
        raise ValueError(f"lin2 must be nn.Linear({ff}, {hidden})")
    if hidden % block or ff % block:
        raise ValueError(f"block {block} must divide hidden {hidden} and ff {ff} (pad the weights with zeros)")
    has_bias = lin1.bias is not None
    if (lin2.bias is not None) != has_bias:
        raise ValueError("both layers must have a bias, or neither")
    with open(path, "wb") as f:
        f.write(b"CORABSR1")
        f.write(struct.pack("<4i", hidden, ff, block, int(has_bias)))
        for lin in (lin1, lin2):
            bsr = lin.weight.detach().to_sparse_bsr((block, block))
            crow, col, values = bsr.crow_indices(), bsr.col_indices(), bsr.values()
            f.write(struct.pack("<i", col.numel()))
            f.write(crow.to(torch.int32).numpy().astype("<i4").tobytes())
            f.write(col.to(torch.int32).numpy().astype("<i4").tobytes())
            f.write(values.to(torch.float32).contiguous().numpy().astype("<f4").tobytes())
        if has_bias:
            for lin in (lin1, lin2):
                f.write(lin.bias.detach().to(torch.float32).numpy().astype("<f4").tobytes())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--ff", type=int, default=3072)
    p.add_argument("--block", type=int, default=32)
    p.add_argument("--density", type=float, default=0.25)
    p.add_argument("--no-bias", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    lin1, lin2 = make_pruned_ff(a.hidden, a.ff, a.block, a.density, not a.no_bias, a.seed)
    write_bsr_weights(lin1, lin2, a.block, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
