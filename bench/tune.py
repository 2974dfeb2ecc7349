"""Pipeline.tune against the default schedule, on held-out sizes, with OpenBLAS beside them.

Each op is written with no schedule. `tune()` measures its candidate register tiles on samples of
one length distribution; the default and the tuned kernel then run on another (held-out) one, and
so does the baseline: NumPy's matmul (OpenBLAS, on the kernel bench/tune.sh picked) on exactly the
useful rows. Ops: a token GEMM (BERT's 768 x 768 projection, one sgemm over the packed tokens),
the mixture-of-experts grouped GEMM of bench/moe.py (one sgemm per expert), AttnV and QK^T (one
batched matmul per sentence over its heads; QK^T's rows are ragged: its keys). Every cora output is checked against the baseline's.
Usage: tune.py [--datasets DIR] [--runs N] [--out FILE]; writes bench/results/tune.md."""
import argparse
import os
import sys
import tempfile

import numpy as np

import cora
from results_table import best_ms, write_table

HERE = os.path.dirname(os.path.abspath(__file__))


def read_lengths(datasets, name, count, cap, seed):
    path = os.path.join(datasets, f"{name}_train_lengths.txt")
    with open(path) as f:
        lengths = [min(int(x), cap) for x in f.read().split()]
    rng = np.random.default_rng(seed)
    return [int(x) for x in rng.choice(lengths, count, replace=False)]


def token_gemm():
    b, s, r, n = (cora.Dim(x) for x in ("b", "s", "r", "n"))
    B = cora.Param("B", 1, 1024)
    length = cora.LengthArray("len", B, 0, 512)
    X = cora.Tensor("X", [(b, B), (s, length(b)), (r, 768)])
    W = cora.Tensor("W", [(r, 768), (n, 768)])
    Y = cora.Func("Y", [(b, B), (s, length(b)), (n, 768)])
    Y.compute(lambda i, j, c: cora.sum(r, 768, X(i, j, r) * W(r, c)))
    pipeline = cora.Pipeline([Y], "tune_token_gemm")

    def shape(lengths):
        return cora.RaggedShape().set(B, len(lengths)).set(length, lengths)

    def data(lengths, rng):
        T = sum(lengths)
        x = rng.standard_normal((T, 768), dtype=np.float32)
        w = rng.standard_normal((768, 768), dtype=np.float32)
        want = np.empty((T, 768), np.float32)
        return {X: x, W: w}, Y, lambda: np.matmul(x, w, out=want), want
    return pipeline, shape, data


def grouped_gemm():
    e, t, r, n = (cora.Dim(x) for x in ("e", "t", "r", "n"))
    E = cora.Param("E", 1, 256)
    count = cora.LengthArray("count", E, 0, 1 << 20)
    X = cora.Tensor("X", [(e, E), (t, count(e)), (r, 512)])
    W = cora.Tensor("W", [(e, E), (r, 512), (n, 1024)])
    Y = cora.Func("Y", [(e, E), (t, count(e)), (n, 1024)])
    Y.compute(lambda a, b, c: cora.sum(r, 512, X(a, b, r) * W(a, r, c)))
    pipeline = cora.Pipeline([Y], "tune_moe")

    def shape(counts):
        return cora.RaggedShape().set(E, len(counts)).set(count, counts)

    def data(counts, rng):
        offsets = np.concatenate([[0], np.cumsum(counts)])
        x = rng.standard_normal((offsets[-1], 512), dtype=np.float32)
        w = rng.standard_normal((len(counts), 512, 1024), dtype=np.float32)
        want = np.empty((offsets[-1], 1024), np.float32)

        def loop():
            for i in range(len(counts)):
                if counts[i]:
                    np.matmul(x[offsets[i]:offsets[i + 1]], w[i], out=want[offsets[i]:offsets[i + 1]])
        return {X: x, W: w}, Y, loop, want
    return pipeline, shape, data


def attn_v(heads=12):
    b, i, h, d, j = (cora.Dim(x) for x in ("b", "i", "h", "d", "j"))
    B = cora.Param("B", 1, 1024)
    length = cora.LengthArray("len", B, 0, 512)
    P = cora.Tensor("P", [(b, B), (h, heads), (i, length(b)), (j, length(b))])
    V = cora.Tensor("V", [(b, B), (j, length(b)), (h, heads), (d, 64)])
    O = cora.Func("O", [(b, B), (i, length(b)), (h, heads), (d, 64)])
    O.compute(lambda bb, q, hh, dd: cora.sum(j, length(bb), P(bb, hh, q, j) * V(bb, j, hh, dd)))
    pipeline = cora.Pipeline([O], "tune_attnv")

    def shape(lengths):
        return cora.RaggedShape().set(B, len(lengths)).set(length, lengths)

    def data(lengths, rng):
        p = rng.standard_normal(sum(heads * n * n for n in lengths), dtype=np.float32)
        v = rng.standard_normal((sum(lengths), heads, 64), dtype=np.float32)
        want = np.empty((sum(lengths), heads, 64), np.float32)
        pp, vv = [], []
        po = vo = 0
        for n in lengths:
            pp.append(p[po:po + heads * n * n].reshape(heads, n, n))
            vv.append(v[vo:vo + n].transpose(1, 0, 2))  # [h, n, 64]
            po += heads * n * n
            vo += n

        def loop():
            o = 0
            for k, n in enumerate(lengths):
                want[o:o + n] = np.matmul(pp[k], vv[k]).transpose(1, 0, 2)
                o += n
        return {P: p, V: v}, O, loop, want
    return pipeline, shape, data


def qk_t(heads=12):
    b, i, h, d, j = (cora.Dim(x) for x in ("b", "i", "h", "d", "j"))
    B = cora.Param("B", 1, 1024)
    length = cora.LengthArray("len", B, 0, 512)
    Q = cora.Tensor("Q", [(b, B), (i, length(b)), (h, heads), (d, 64)])
    K = cora.Tensor("K", [(b, B), (j, length(b)), (h, heads), (d, 64)])
    S = cora.Func("S", [(b, B), (h, heads), (i, length(b)), (j, length(b))])
    S.compute(lambda bb, hh, q, k: cora.sum(d, 64, Q(bb, q, hh, d) * K(bb, k, hh, d)))
    pipeline = cora.Pipeline([S], "tune_qkt")

    def shape(lengths):
        return cora.RaggedShape().set(B, len(lengths)).set(length, lengths)

    def data(lengths, rng):
        q = rng.standard_normal((sum(lengths), heads, 64), dtype=np.float32)
        k = rng.standard_normal((sum(lengths), heads, 64), dtype=np.float32)
        want = np.empty(sum(heads * n * n for n in lengths), np.float32)
        qq, kk, views = [], [], []
        o = so = 0
        for n in lengths:
            qq.append(q[o:o + n].transpose(1, 0, 2))  # [h, n, 64]
            kk.append(k[o:o + n].transpose(1, 2, 0))  # [h, 64, n]
            views.append(want[so:so + heads * n * n].reshape(heads, n, n))
            o += n
            so += heads * n * n

        def loop():
            for a, c, w in zip(qq, kk, views):
                np.matmul(a, c, out=w)
        return {Q: q, K: k}, S, loop, want
    return pipeline, shape, data


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default=os.path.join(HERE, "..", "..", "shared", "datasets"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "tune.md"))
    args = ap.parse_args(argv)
    if args.runs < 1:
        print("tune.py: --runs must be positive", file=sys.stderr)
        return 2
    if not os.path.isdir(args.datasets):
        print(f"tune.py: no datasets directory {args.datasets}", file=sys.stderr)
        return 2
    rng = np.random.default_rng(0)
    lengths = {name: read_lengths(args.datasets, name, 32, 512, 1) for name in ("cola", "squad", "race")}
    moe_counts = {"uniform": [int(c) for c in rng.multinomial(1024, [1 / 8] * 8)],
                  "skewed (2 empty)": [300, 0, 212, 150, 0, 200, 90, 72]}
    cases = [("token GEMM 768x768", token_gemm, "cola", lengths["cola"], "race", lengths["race"]),
             ("token GEMM 768x768", token_gemm, "race", lengths["race"], "squad", lengths["squad"]),
             ("MoE T=1024 E=8 512x1024", grouped_gemm, "uniform", moe_counts["uniform"], "skewed (2 empty)",
              moe_counts["skewed (2 empty)"]),
             ("AttnV 12 heads of 64", attn_v, "cola", lengths["cola"], "squad", lengths["squad"]),
             ("QK^T 12 heads of 64", qk_t, "cola", lengths["cola"], "squad", lengths["squad"]),
             ("QK^T 12 heads of 64", qk_t, "squad", lengths["squad"], "race", lengths["race"])]
    core = os.environ.get("OPENBLAS_CORETYPE", "detected by OpenBLAS")
    lines = ["# Tuned against default: held-out sizes", "",
             f"`bash bench/tune.sh`: each op written with no schedule; `Pipeline.tune` measured its candidate "
             f"register tiles on one sample (\"tuned on\"), then the default and the tuned kernel ran on "
             f"another (\"run on\", held out), beside NumPy/OpenBLAS (kernel: {core}) on exactly the useful "
             f"rows; {os.cpu_count()} threads, best of {args.runs}; lengths: 32 sentences drawn from each "
             f"dataset's train lengths (seed 1, capped at 512); vector width {cora.host_vector_bits()} bits. "
             "Ratios above 1: faster than the baseline.", "",
             "| op | tuned on | run on | tuning s | choice | default ms | tuned ms | tuned / default | "
             "OpenBLAS ms | default vs OpenBLAS | tuned vs OpenBLAS | max rel. error |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, build, tune_name, tune_sizes, run_name, run_sizes in cases:
            pipeline, shape, data = build()
            result = pipeline.tune([shape(tune_sizes)], table=os.path.join(tmp, "tuning.txt"))
            default = pipeline.compile()
            s = shape(run_sizes)
            inputs, out, baseline, want = data(run_sizes, rng)
            times, errors = [], []
            for k in (default, result.kernel):
                got = cora.alloc(out, s)
                bindings = dict(inputs)
                bindings[out] = got
                times.append(best_ms(lambda: k.run(s, bindings), args.runs))
                baseline()
                g, w = got.reshape(-1).astype(np.float64), want.reshape(-1).astype(np.float64)
                if not np.isfinite(g).all():
                    print(f"tune.py: {name}: non-finite output", file=sys.stderr)
                    return 1
                errors.append(float(np.max(np.abs(g - w)) / max(np.max(np.abs(w)), 1e-30)))
            base = best_ms(baseline, args.runs)
            if max(errors) > 1e-3:
                print(f"tune.py: {name}: cora differs from OpenBLAS by {max(errors):.1e}", file=sys.stderr)
                return 1
            tile = result.contraction_tiles
            choice = ", ".join(f"{f}: " + (f"{t.rows}x{t.vectors}v/{t.panel}" if t.tiled else "untiled")
                               for f, t in tile.items())
            print(result.report, end="")
            print(f"{name}, tuned on {tune_name}, run on {run_name}: default {times[0]:.3f} ms, tuned {times[1]:.3f} "
                  f"ms ({times[0] / times[1]:.2f}x), OpenBLAS {base:.3f} ms")
            lines.append(f"| {name} | {tune_name} | {run_name} | {result.seconds:.1f} | {choice} | {times[0]:.3f} | "
                         f"{times[1]:.3f} | {times[0] / times[1]:.2f}x | {base:.3f} | {base / times[0]:.2f}x | "
                         f"{base / times[1]:.2f}x | {max(errors):.1e} |")
    write_table(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
