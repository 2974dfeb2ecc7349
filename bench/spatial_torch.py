"""PyTorch's dense 3x3 convolution on the shapes of bench/spatial.cpp, 2 threads: the faster of
NCHW and channels_last (PyTorch's CPU conv2d calls oneDNN for both when it has it), the best of
--runs calls after a warm-up. Prints "H W C ms" per shape; used by bench/spatial.sh."""
import argparse
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except Exception as e:  # PyTorch missing: the benchmark reports n/a
    print(f"spatial_torch: PyTorch not importable ({e})", file=sys.stderr)
    sys.exit(0)

parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=5)
parser.add_argument("--quick", action="store_true")
args = parser.parse_args()
torch.set_num_threads(2)
shapes = [(40, 40, 64)] if args.quick else [(80, 80, 128), (160, 160, 64), (20, 20, 512)]
for h, w, c in shapes:
    x = torch.randn(1, c, h, w)
    wt = torch.randn(c, c, 3, 3)
    b = torch.randn(c)
    best = float("inf")
    for layout in (torch.contiguous_format, torch.channels_last):
        xl, wl = x.contiguous(memory_format=layout), wt.contiguous(memory_format=layout)
        with torch.no_grad():
            F.conv2d(xl, wl, b, padding=1)
            for _ in range(args.runs):
                t0 = time.perf_counter()
                F.conv2d(xl, wl, b, padding=1)
                best = min(best, time.perf_counter() - t0)
    print(f"{h} {w} {c} {best * 1e3:.4f}")
