"""Shared by the Python benchmark scripts (python_bench.py, moe.py): write a results table."""
import os


def write_table(lines, path):
    """Write the Markdown lines to `path` (its directory created) and say where."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", path)
