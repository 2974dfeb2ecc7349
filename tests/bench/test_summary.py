"""bench/summary.py: the combined table's ratios from crafted results files (each ratio from the
file's own run), missing files left out and named, and bad flags refused with exit status 2."""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("summary", os.path.join(HERE, "..", "..", "bench", "summary.py"))
summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(summary)

DEFAULT_SCHEDULES = """# Default schedule and recipes vs naive loops

### 2 threads

**gemm** (8 sentences, Y = max(X W + b, 0))

| variant | time (ms) | vs naive | max rel. error |
|---|---:|---:|---:|
| naive | 100.0 | 1.00x | 0.0e+00 |
| old_nest | 90.0 | 1.11x | 0.0e+00 |
| default | 4.0 | 25.00x | 0.0e+00 |
| tuned | 3.6 | 27.78x | 0.0e+00 |
| r1_tiles | 5.0 | 20.00x | 0.0e+00 |
| r2_packed | 3.2 | 31.25x | 0.0e+00 |

### 1 thread

**gemm** (8 sentences, Y = max(X W + b, 0))

| variant | time (ms) | vs naive | max rel. error |
|---|---:|---:|---:|
| naive | 200.0 | 1.00x | 0.0e+00 |
| default | 10.0 | 20.00x | 0.0e+00 |
"""

MOE = """| case | per-expert OpenBLAS ms | cora default ms | ratio | cora recipe ms | ratio | max rel. error |
|---|---|---|---|---|---|---|
| T=8, E=2 | 6.0 | 5.0 | 1.20x | 4.0 | 1.50x | 1e-07 |
"""

BLOCK_SPARSE = """| shape | tokens | block | density | cora ms | sgemm ms | oneDNN ms | vs sgemm | vs oneDNN | target (vs dense) | GFLOP/s useful | cora default ms | default vs dense | default, row-major blocks ms | row-major default vs dense |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
| 64^3 | 64 | 32x32 | 25% (25.0%) | 2.00 | 9.00 | 8.00 | 4.50x | 4.00x | - | 1.0 | 4.00 | 2.00x | 5.00 | 1.60x |
"""


def write(tmp_path, files):
    for name, text in files.items():
        (tmp_path / name).write_text(text)


def rows_of(path):
    lines = path.read_text().splitlines()
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("| ") and "---" not in line][1:]


def test_ratios_come_from_each_files_own_run(tmp_path):
    write(tmp_path, {"default_schedules.md": DEFAULT_SCHEDULES, "moe.md": MOE, "block_sparse.md": BLOCK_SPARSE})
    out = tmp_path / "summary.md"
    assert summary.main(["--results", str(tmp_path), "--out", str(out)]) == 0
    rows = {r[0]: r for r in rows_of(out)}
    gemm2 = rows["gemm (8 sentences, Y = max(X W + b, 0)), 2 threads"]
    assert gemm2[1] == "25.00x"                    # naive 100 / default 4
    assert gemm2[2] == "0.80x (`r2_packed`); tuned 0.89x"  # the best hand step (3.2) / default (4.0), / tuned (3.6)
    assert gemm2[3] == "1.11x (same sizes)"        # default 4.0 / tuned 3.6
    gemm1 = rows["gemm (8 sentences, Y = max(X W + b, 0)), 1 thread"]
    assert gemm1[1] == "20.00x" and gemm1[2] == "-"  # no hand step in that run
    assert gemm1[3] == "-"                           # nor a tuned variant
    moe = rows["MoE grouped GEMM, T=8, E=2"]
    assert moe[2] == "0.80x" and moe[4] == "1.20x" and moe[5] == "1.50x"
    bsr = rows["block-sparse linear 64^3, 32x32 blocks at 25%"]
    assert bsr[2] == "0.50x"                       # hand 2.0 / default 4.0
    assert bsr[4] == "2.00x (dense)"               # the faster dense baseline (oneDNN 8.0) / 4.0
    rows_bsr = rows["block-sparse linear 64^3, 32x32 row-major blocks at 25%"]
    assert rows_bsr[2] == "0.40x"                  # hand 2.0 / row-major default 5.0
    assert rows_bsr[4] == "1.60x (dense)"          # oneDNN 8.0 / 5.0
    text = out.read_text()
    assert "missing: tune.md" in text


def test_bad_input_is_refused(tmp_path, capsys):
    assert summary.main(["--results", str(tmp_path / "absent")]) == 2
    assert "no such directory" in capsys.readouterr().err
    assert summary.main(["--unknown-flag"]) == 2
