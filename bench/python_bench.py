"""bench/python.sh's measurements (see there). Usage: python_bench.py TRANSFORMER_ENCODER [--runs N]
[--layers N] [--out FILE]. Prints each ratio and writes the table to bench/results/python.md."""
import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import cora
import cora.torch
from results_table import write_table

HERE = os.path.dirname(os.path.abspath(__file__))
DATASETS = os.path.join(HERE, "..", "..", "shared", "datasets")


def per_call_us(f, calls=2000, repeats=7):
    """Median over `repeats` of the mean time of `calls` calls, in microseconds."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(calls):
            f()
        times.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(times)


def call_overhead(elements):
    i = cora.Dim("i")
    N = cora.Param("N", 1, 1 << 24)
    A = cora.Tensor("A", [(i, N)])
    Out = cora.Func("Out", [(i, N)])
    Out.compute(lambda j: A(j) * 2.0 + 1.0)
    pipeline = cora.Pipeline([Out], "bench_python_call")
    kernel = pipeline.compile()
    shape = cora.RaggedShape().set(N, elements)
    a, out = np.ones(elements, np.float32), np.zeros(elements, np.float32)
    ta, tout = torch.ones(elements), torch.zeros(elements)
    kernel.run(shape, {A: a, Out: out})
    cpp = statistics.median(kernel.time_ms(shape, {A: a, Out: out}, 2000) * 1e3 for _ in range(7))
    numpy_us = per_call_us(lambda: kernel.run(shape, {A: a, Out: out}))
    torch_us = per_call_us(lambda: kernel.run(shape, {A: ta, Out: tout}))
    with tempfile.TemporaryDirectory() as d:
        lib = cora.load_library(cora.compile_to_library(pipeline, d, "bench_python_call_aot").library)
        aot_us = per_call_us(lambda: lib(N=elements, A=a, Out=out), calls=500)
    return cpp, numpy_us, torch_us, aot_us


def read_lengths(name, batch):
    path = os.path.join(DATASETS, f"{name}_train_lengths.txt")
    if not os.path.isfile(path):
        return None, None
    with open(path) as f:
        lengths = [int(x) for x in f.read().split()[:batch]]
    return path, [min(n, 512) for n in lengths]


def app_ms(binary, lengths_file, batch, layers, runs):
    cmd = [binary, "--lengths", lengths_file, "--batch", str(batch), "--batches", "1", "--layers", str(layers),
           "--runs", str(runs), "--no-check"]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m = re.search(r"total: (\d+) tokens; ragged ([\d.]+) ms", text)
    if not m:
        raise RuntimeError("unexpected output from " + " ".join(cmd) + ":\n" + text)
    return int(m.group(1)), float(m.group(2))


def module_ms(lengths, layers, runs):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)
    encoder = cora.torch.TransformerEncoder(torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False))
    tokens = torch.randn(sum(lengths), 512)
    offsets = torch.tensor([0] + lengths).cumsum(0)
    encoder(tokens, offsets)  # warm-up
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        encoder(tokens, offsets)
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("binary")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--out", default=os.path.join(HERE, "results", "python.md"))
    args = p.parse_args(argv)
    if args.runs < 1 or args.layers < 1 or args.batch < 1:
        print("python_bench.py: --runs, --layers and --batch must be positive", file=sys.stderr)
        return 2
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
               platform.processor())
    lines = [f"# The Python door's costs", "",
             f"`bash bench/python.sh` on {cpu}, {os.cpu_count()} cores; ratios measured in one run.", "",
             "## A cached kernel called from Python", "",
             "`y = 2x + 1` over N floats. C++: `Kernel::time_ms` (the median of 2000 `Kernel::run` calls, "
             "checks and views included). Python: `kernel.run(shape, {A: a, Out: out})` in a loop (the median "
             "of 7 means over 2000 calls); AOT: `cora.load_library(...)(N=n, A=a, Out=out)` (ctypes).", "",
             "| N | C++ call µs | Python, NumPy µs | overhead µs | Python, PyTorch µs | overhead µs | "
             "AOT library from Python µs |", "|---|---|---|---|---|---|---|"]
    for n in (1, 4096, 1 << 20):
        cpp, np_us, torch_us, aot_us = call_overhead(n)
        print(f"call N={n}: C++ {cpp:.2f} us, numpy {np_us:.2f} us (+{np_us - cpp:.2f}), torch {torch_us:.2f} us "
              f"(+{torch_us - cpp:.2f}), AOT via ctypes {aot_us:.2f} us")
        lines.append(f"| {n} | {cpp:.2f} | {np_us:.2f} | {np_us - cpp:+.2f} | {torch_us:.2f} | {torch_us - cpp:+.2f} "
                     f"| {aot_us:.2f} |")
    lines += ["", f"## The encoder as a PyTorch module (batch {args.batch}, {args.layers} layers, 512/8/2048)", "",
              f"`cora.torch.TransformerEncoder` against `transformer_encoder --lengths FILE --batch {args.batch} "
              f"--batches 1 --layers {args.layers} --runs {args.runs} --no-check` (its ragged time), the first "
              f"{args.batch} lengths of each dataset in ../shared/datasets; best of {args.runs} runs each.", "",
              "| dataset | tokens | transformer_encoder ms | Python module ms | module / program |",
              "|---|---|---|---|---|"]
    ran = 0
    for name in ("cola", "mrpc", "mnli", "squad", "race"):
        path, lengths = read_lengths(name, args.batch)
        if path is None:
            print(f"{name}: no lengths file in {DATASETS}, skipped")
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(" ".join(map(str, lengths)))
        try:
            tokens, app = app_ms(args.binary, f.name, args.batch, args.layers, args.runs)
        finally:
            os.unlink(f.name)
        mod = module_ms(lengths, args.layers, args.runs)
        print(f"encoder {name}: {tokens} tokens, program {app:.2f} ms, module {mod:.2f} ms, ratio {mod / app:.3f}")
        lines.append(f"| {name} | {tokens} | {app:.2f} | {mod:.2f} | {mod / app:.3f} |")
        ran += 1
    if not ran:
        lines.append("| (no datasets found) | | | | |")
    write_table(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
