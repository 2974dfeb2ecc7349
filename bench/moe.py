"""A mixture-of-experts grouped GEMM written in cora from Python, against a per-expert loop of
OpenBLAS sgemm calls (NumPy's matmul on Debian's OpenBLAS; bench/moe.sh picks its fastest correct
kernel). Y[e, t, :] = X[e, t, :] @ W[e] for the t < count(e) tokens routed to expert e, some experts
empty. Usage: moe.py [--runs N] [--out FILE]; prints ratios, writes bench/results/moe.md."""
import argparse
import os
import sys

import numpy as np

import cora
from results_table import best_ms, write_table

HERE = os.path.dirname(os.path.abspath(__file__))


def grouped_gemm(K, N, schedule):
    e, t, r, n = (cora.Dim(x) for x in ("e", "t", "r", "n"))
    E = cora.Param("E", 1, 256)
    count = cora.LengthArray("count", E, 0, 1 << 20)
    X = cora.Tensor("X", [(e, E), (t, count(e)), (r, K)])
    W = cora.Tensor("W", [(e, E), (r, K), (n, N)])
    Y = cora.Func("Y", [(e, E), (t, count(e)), (n, N)])
    Y.compute(lambda a, b, c: cora.sum(r, K, X(a, b, r) * W(a, r, c)))
    if schedule:
        # The recipe: per expert, register tiles of 4 tokens x 4 vectors of columns over 256-deep
        # k-panels, each panel of the expert's W copied once per tile column (cache_read), the
        # column panels in parallel, whole token tiles without their guard (specialize_interior).
        # Tokens are not fused across experts: a block of tokens spanning two experts would read
        # two W panels, which cache_read cannot copy as one box.
        to, ti, no, ni, ko, ki = (cora.Dim(x) for x in ("to", "ti", "no", "ni", "ko", "ki"))
        lanes = cora.host_vector_bits() // 32
        (Y.split(t, to, ti, 4).split(n, no, ni, 4 * lanes).split(r, ko, ki, 256)
          .reorder(e, no, ko, to, ki, ti, ni).parallel(no).unroll(ti).vectorize(ni)
          .cache_write(to).cache_read(W, ko).specialize_interior(to))
    return cora.Pipeline([Y], "moe_" + ("recipe" if schedule else "default")).compile(), X, W, Y, E, count


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--out", default=os.path.join(HERE, "results", "moe.md"))
    args = p.parse_args(argv)
    if args.runs < 1:
        print("moe.py: --runs must be positive", file=sys.stderr)
        return 2
    rng = np.random.default_rng(0)
    cases = [("T=1024, E=8 (2 empty), K=512, N=1024", [300, 0, 212, 150, 0, 200, 90, 72], 512, 1024),
             ("T=4096, E=16, K=768, N=3072", list(rng.multinomial(4096, [1 / 16] * 16)), 768, 3072),
             ("T=256, E=8, K=1024, N=1024", list(rng.multinomial(256, [1 / 8] * 8)), 1024, 1024)]
    core = os.environ.get("OPENBLAS_CORETYPE", "detected by OpenBLAS")
    lines = ["# Grouped GEMM (mixture of experts) from Python", "",
             f"`bash bench/moe.sh`: cora from Python against a per-expert loop of NumPy matmuls (OpenBLAS, kernel: "
             f"{core}), {os.cpu_count()} threads both, best of {args.runs}; ratios are baseline time / cora time.", "",
             "| case | per-expert OpenBLAS ms | cora default ms | ratio | cora recipe ms | ratio | max rel. error |",
             "|---|---|---|---|---|---|---|"]
    for name, counts, K, N in cases:
        counts = np.array(counts, np.int32)
        T = int(counts.sum())
        offsets = np.concatenate([[0], np.cumsum(counts)])
        x = rng.standard_normal((T, K), dtype=np.float32)
        w = rng.standard_normal((len(counts), K, N), dtype=np.float32)
        want = np.empty((T, N), np.float32)

        def loop():
            for i in range(len(counts)):
                if counts[i]:
                    np.matmul(x[offsets[i]:offsets[i + 1]], w[i], out=want[offsets[i]:offsets[i + 1]])

        base = best_ms(loop, args.runs)
        row, worst = [], 0.0
        for schedule in (False, True):
            kernel, X, W, Y, E, count = grouped_gemm(K, N, schedule)
            shape = cora.RaggedShape().set(E, len(counts)).set(count, counts)
            y = np.full((T, N), np.nan, np.float32)
            ms = best_ms(lambda: kernel.run(shape, {X: x, W: w, Y: y}), args.runs)
            worst = max(worst, float(np.max(np.abs(y - want)) / np.max(np.abs(want))))
            row += [ms, base / ms]
        if not worst <= 1e-5:
            print(f"{name}: cora differs from the per-expert loop (max relative error {worst})", file=sys.stderr)
            return 1
        print(f"{name}: per-expert loop {base:.2f} ms, cora default {row[0]:.2f} ms ({row[1]:.2f}x), "
              f"recipe {row[2]:.2f} ms ({row[3]:.2f}x)")
        lines.append(f"| {name} | {base:.2f} | {row[0]:.2f} | {row[1]:.2f}x | {row[2]:.2f} | {row[3]:.2f}x | "
                     f"{worst:.1e} |")
    write_table(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
