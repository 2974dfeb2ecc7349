"""Shared by the Python benchmark scripts (python_bench.py, moe.py, tune.py): the best time of a
few runs, and writing a results table."""
import os
import time


def best_ms(f, runs):
    """Milliseconds of the fastest of `runs` calls of f, after one untimed warm-up call."""
    f()
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def write_table(lines, path):
    """Write the Markdown lines to `path` (its directory created) and say where."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", path)
