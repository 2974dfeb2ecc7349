#!/usr/bin/env python3
"""One table of how fast cora is without a schedule: default, tuned, hand-written, naive and BLAS,
gathered from the results files the benchmark scripts write (bench/results/*.md).

Every ratio in a row comes from one run of one script (the file named in the row); rows from
different files are different runs, so compare ratios, never times, across rows. A cell is "-"
where that run has no such variant. Ratios above 1: the default is faster than the other.

Usage: python3 bench/summary.py [--results DIR] [--out FILE]   (writes DIR/summary.md by default)
Exit status 2 on a bad flag or a results directory that does not exist; a missing results file
only leaves its rows out (the table says which files it read)."""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def table_rows(text, header_start):
    """The rows (lists of cells) of the first markdown table whose header starts with
    `header_start`, the header first."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(header_start):
            rows = []
            for row in lines[i:]:
                if not row.startswith("|"):
                    break
                if re.match(r"^\|[-| :]+\|$", row):
                    continue
                rows.append([c.strip() for c in row.strip().strip("|").split("|")])
            return rows
    return []


def number(cell):
    m = re.match(r"^\*{0,2}([0-9.]+)", cell)
    return float(m.group(1)) if m else None


def ratio(a, b):
    """a / b as text, or '-' when either is missing."""
    return f"{a / b:.2f}x" if a and b else "-"


def make_row(op, source, cells):
    """A table row: the op, its source file, and the ratio cells given (the others '-')."""
    row = {c: "-" for c in COLUMNS}
    row.update(cells, op=op, source=source)
    return row


def table_dicts(text, header_start):
    """The body rows of the first table whose header starts with `header_start`, as dicts keyed
    by the header's cells."""
    rows = table_rows(text, header_start)
    return [dict(zip(rows[0], r)) for r in rows[1:]]


def from_default_schedules(text, source):
    """Per op and thread count: default vs naive, vs the best hand-written step (r1_..., r2_...), and
    where the op has a `tuned` variant (tune() on the op's own sizes) the tuned kernel vs both."""
    out = []
    for section in re.split(r"^### ", text, flags=re.M)[1:]:
        threads = section.splitlines()[0].strip()
        for m in re.finditer(r"^\*\*(\w+)\*\* \((.*)\)[ \t]*$", section, flags=re.M):
            op, what = m.group(1), m.group(2)
            rest = section[m.end():]
            nxt = re.search(r"^\*\*\w+\*\*", rest, flags=re.M)
            body = rest[: nxt.start()] if nxt else rest
            times = {}
            for row in table_rows(body.strip(), "| variant"):
                if row[0] != "variant" and number(row[1]) is not None:
                    times[row[0]] = number(row[1])
            hand = [(t, v) for v, t in times.items() if re.match(r"^r\d+_", v)]
            best = min(hand) if hand else (None, None)
            default, tuned = times.get("default"), times.get("tuned")
            vs_hand = ratio(best[0], default) + (f" (`{best[1]}`)" if best[1] else "")
            if tuned is not None and best[0] is not None:
                vs_hand += f"; tuned {ratio(best[0], tuned)}"
            out.append(make_row(f"{op} ({what}), {threads}", source, {
                "vs naive": ratio(times.get("naive"), default),
                "vs hand": vs_hand,
                "tuned / default": ratio(default, tuned) + " (same sizes)" if tuned is not None else "-",
            }))
    return out


def from_tune(text, source):
    return [make_row(f"{c['op']} (tuned on {c['tuned on']}, run on {c['run on']})", source, {
        "tuned / default": c.get("tuned / default", "-"),
        "vs BLAS": c.get("default vs OpenBLAS", "-"),
    }) for c in table_dicts(text, "| op |")]


def from_moe(text, source):
    out = []
    for r in table_rows(text, "| case |")[1:]:
        blas, default, recipe = number(r[1]), number(r[2]), number(r[4])
        out.append(make_row(f"MoE grouped GEMM, {r[0]}", source, {
            "vs hand": ratio(recipe, default),
            "vs BLAS": ratio(blas, default),
            "hand vs BLAS": ratio(blas, recipe),
        }))
    return out


def from_block_sparse(text, source):
    out = []
    for cell in table_dicts(text, "| shape |"):
        if "cora default ms" not in cell:  # a results file from before the default's columns
            return []
        dense = [d for d in (number(cell.get("sgemm ms", "")), number(cell.get("oneDNN ms", ""))) if d]
        dense = min(dense) if dense else None
        hand, default = number(cell["cora ms"]), number(cell["cora default ms"])
        out.append(make_row(f"block-sparse linear {cell['shape']}, {cell['block']} blocks at "
                            f"{cell['density'].split()[0]}", source, {
                                "vs hand": ratio(hand, default),
                                "vs BLAS": ratio(dense, default) + " (dense)",
                                "hand vs BLAS": ratio(dense, hand) + " (dense)",
                            }))
        # The default over row-major blocks (PyTorch's values() as they are), where the run has it.
        rows_default = number(cell.get("default, row-major blocks ms", ""))
        if rows_default:
            out.append(make_row(f"block-sparse linear {cell['shape']}, {cell['block']} row-major blocks at "
                                f"{cell['density'].split()[0]}", source, {
                                    "vs hand": ratio(hand, rows_default),
                                    "vs BLAS": ratio(dense, rows_default) + " (dense)",
                                    "hand vs BLAS": ratio(dense, hand) + " (dense)",
                                }))
    return out


SOURCES = [
    ("default_schedules.md", "bash bench/default_schedules.sh", from_default_schedules),
    ("tune.md", "bash bench/tune.sh", from_tune),
    ("moe.md", "bash bench/moe.sh", from_moe),
    ("block_sparse.md", "bash bench/block_sparse.sh", from_block_sparse),
]
COLUMNS = ["op", "vs naive", "vs hand", "tuned / default", "vs BLAS", "hand vs BLAS", "source"]


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", default=os.path.join(HERE, "results"))
    p.add_argument("--out", default=None)
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    if not os.path.isdir(args.results):
        print(f"summary.py: --results {args.results}: no such directory", file=sys.stderr)
        return 2
    rows, read, missing = [], [], []
    for name, command, parse in SOURCES:
        path = os.path.join(args.results, name)
        if not os.path.exists(path):
            missing.append(name)
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        got = parse(text, f"`{name}`")
        read.append(f"`{name}` ({command}: {len(got)} rows)")
        rows += got
    lines = [
        "# cora without a schedule: default, tuned, hand-written, naive and BLAS",
        "",
        "Written by `python3 bench/summary.py` from the results files of the benchmark scripts. Each "
        "row's ratios come from one run of one script (its source file); rows from different files "
        "are different runs. Ratios above 1: the default (or, in the last column, the hand schedule) "
        "is faster. `vs hand`: against the best hand-written schedule of that run (the user guide's "
        "recipe steps, the app's schedule), and the tuned kernel's after `tuned`; `tuned / default`: "
        "`Pipeline.tune`'s choice on held-out lengths, or on the sizes it was tuned on (same sizes); `vs BLAS`: against OpenBLAS on its fastest kernel (per-expert loops, the useful "
        "rows), or the faster of sgemm and oneDNN on the dense weight for block-sparse layers.",
        "",
        "Read: " + ", ".join(read) + (f"; missing: {', '.join(missing)}" if missing else "") + ".",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for r in rows:
        lines.append("| " + " | ".join(r[c] for c in COLUMNS) + " |")
    out = args.out or os.path.join(args.results, "summary.md")
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
