#!/usr/bin/python3
"""The transformer encoder: cora (AOT, apps/transformer) against PyTorch CPU on the same machine,
threads, sizes and lengths, in one script run. Writes bench/results/encoder.md (and encoder.png
when matplotlib is present). Run through bench/encoder.sh, which builds what it needs.

PyTorch variants (nn.TransformerEncoder, eval, no grad, fp32):
  padded   the batch padded to its longest item, src_key_padding_mask (the fused fast path)
  nested   the same with enable_nested_tensor=True: PyTorch's nested fast path skips the padding
  sorted   the batch sorted by length, cut into micro-batches of m items, each padded to its own
           longest; the best m of {1, 2, 4, 8, 16, 32} is kept
cora runs the same model on the ragged batch (`ragged`) and, in the same process, the same kernels
on the padded batch (`cora padded`). Usage:
  encoder.py ENCODER_BINARY [--datasets DIR] [--batch 32,128] [--layers 6] [--runs 2] [--threads 2]
"""
import argparse
import ctypes
import os
import re
import subprocess
import sys
import time

import torch

DATASETS = [("race", 512), ("squad", 384), ("mnli", 128), ("mrpc", 112), ("cola", 48)]


def openblas_corename():
    for name in ("libopenblas.so.0", "libopenblas.so"):
        try:
            lib = ctypes.CDLL(name)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib.openblas_get_corename().decode()
        except OSError:
            continue
    return "not loaded"


def best(runs, f):
    t = 1e30
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        t = min(t, time.perf_counter() - t0)
    return t


def torch_times(lengths, layers, runs):
    hidden, heads, ff = 512, 8, 2048
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(hidden, heads, ff, dropout=0.0, batch_first=True)
    padded_model = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()
    nested_model = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=True).eval()

    def batch_of(ls):
        L = max(ls)
        x = torch.randn(len(ls), L, hidden)
        mask = torch.ones(len(ls), L, dtype=torch.bool)
        for b, n in enumerate(ls):
            mask[b, :n] = False
        return x, mask

    out = {}
    with torch.no_grad():
        x, mask = batch_of(lengths)
        out["padded"] = best(runs, lambda: padded_model(x, src_key_padding_mask=mask))
        out["nested"] = best(runs, lambda: nested_model(x, src_key_padding_mask=mask))
        ordered = sorted(lengths)
        best_m, best_t = None, 1e30
        for m in (1, 2, 4, 8, 16, 32):
            if m > len(lengths):
                break
            parts = [batch_of(ordered[i:i + m]) for i in range(0, len(ordered), m)]
            t = best(runs, lambda: [padded_model(px, src_key_padding_mask=pm) for px, pm in parts])
            if t < best_t:
                best_m, best_t = m, t
        out["sorted"] = best_t
        out["sorted_m"] = best_m
    return out


def cora_times(binary, lengths_file, batch, layers, runs, threads):
    cmd = [binary, "--lengths", lengths_file, "--batch", str(batch), "--batches", "1", "--layers", str(layers),
           "--runs", str(runs), "--threads", str(threads), "--no-check"]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m = re.search(r"total: (\d+) tokens; ragged ([\d.]+) ms.*padded ([\d.]+) ms; padded/useful work ([\d.]+)x", text)
    if not m:
        raise RuntimeError("unexpected output from " + " ".join(cmd) + ":\n" + text)
    shape = re.search(r"shape work .*: ([\d.]+) us", text)
    return {"tokens": int(m.group(1)), "ragged": float(m.group(2)) / 1e3, "cora_padded": float(m.group(3)) / 1e3,
            "work_ratio": float(m.group(4)), "shape_us": float(shape.group(1)) if shape else float("nan")}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("binary")
    p.add_argument("--datasets", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "datasets"))
    p.add_argument("--batch", default="32,128")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    core = openblas_corename()
    rows = []
    for batch in [int(b) for b in a.batch.split(",")]:
        for name, max_len in DATASETS:
            path = os.path.join(a.datasets, f"{name}_train_lengths.txt")
            if not os.path.exists(path):
                print(f"skipping {name}: {path} not found")
                continue
            with open(path) as f:
                lengths = [int(next(f)) for _ in range(batch)]
            lengths = [min(n, max_len) for n in lengths]
            c = cora_times(a.binary, path, batch, a.layers, a.runs, a.threads)
            t = torch_times(lengths, a.layers, a.runs)
            best_torch = min(t["padded"], t["nested"], t["sorted"])
            row = dict(dataset=name, batch=batch, **c, **t, vs_padded=t["padded"] / c["ragged"],
                       vs_best=best_torch / c["ragged"])
            rows.append(row)
            print(f"{name:6s} batch {batch:4d}: cora {c['ragged'] * 1e3:9.1f} ms (padded {c['cora_padded'] * 1e3:9.1f}), "
                  f"torch padded {t['padded'] * 1e3:9.1f}, nested {t['nested'] * 1e3:9.1f}, "
                  f"sorted {t['sorted'] * 1e3:9.1f} (m={t['sorted_m']}); vs padded {row['vs_padded']:.2f}x, "
                  f"vs best {row['vs_best']:.2f}x", flush=True)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "encoder.md"), "w") as f:
        f.write("# Transformer encoder: cora vs PyTorch CPU\n\n")
        f.write(f"Command: `bash bench/encoder.sh` ({a.layers} layers, hidden 512, 8 heads, ff 2048, ReLU; "
                f"{a.threads} threads; best of {a.runs}; first batch of each dataset, lengths capped as CoRA does). "
                f"OpenBLAS core: {core} ({os.environ.get('CORA_OPENBLAS_CORE_NOTE', 'not probed')}); "
                f"PyTorch {torch.__version__}; MALLOC_MMAP_MAX_="
                f"{os.environ.get('MALLOC_MMAP_MAX_', '(unset)')} (freed memory kept for reuse in both).\n\n")
        f.write("| dataset | batch | tokens | padded/useful work | cora ragged ms | cora padded ms | torch padded ms | "
                "torch nested ms | torch sorted ms (m) | vs torch padded | vs best torch | cora shape work us |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['dataset']} | {r['batch']} | {r['tokens']} | {r['work_ratio']:.2f} | {r['ragged'] * 1e3:.1f} | "
                    f"{r['cora_padded'] * 1e3:.1f} | {r['padded'] * 1e3:.1f} | {r['nested'] * 1e3:.1f} | "
                    f"{r['sorted'] * 1e3:.1f} ({r['sorted_m']}) | {r['vs_padded']:.2f}x | {r['vs_best']:.2f}x | "
                    f"{r['shape_us']:.1f} |\n")
        for batch in sorted({r["batch"] for r in rows}):
            sel = [r for r in rows if r["batch"] == batch]
            gp = 1.0
            gb = 1.0
            for r in sel:
                gp *= r["vs_padded"]
                gb *= r["vs_best"]
            f.write(f"\nBatch {batch}: geomean speed-up {gp ** (1 / len(sel)):.2f}x over PyTorch padded, "
                    f"{gb ** (1 / len(sel)):.2f}x over the best PyTorch variant per dataset ({len(sel)} datasets).\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(9, 4))
        labels = [f"{r['dataset']}/{r['batch']}" for r in rows]
        xs = range(len(rows))
        w = 0.2
        for k, (key, label) in enumerate([("ragged", "cora"), ("padded", "torch padded"), ("nested", "torch nested"),
                                          ("sorted", "torch sorted")]):
            ax.bar([x + (k - 1.5) * w for x in xs], [r[key] * 1e3 for r in rows], w, label=label)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, rotation=30)
        ax.set_ylabel("ms per batch (lower is better)")
        ax.set_yscale("log")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(a.out, "encoder.png"), dpi=120)
    except ImportError:
        print("matplotlib not installed: no plot")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
