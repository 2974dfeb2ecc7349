#!/usr/bin/env python3
"""Turns bench/results/threads{1,2}.json into results.md (GFLOP/s and the ratio of each
baseline's time to cora's, per group) and results.png (GFLOP/s per group, bars per variant)."""
import json
import os
import sys


def load(path):
    with open(path) as f:
        data = json.load(f)
    rows = []
    # With --benchmark_repetitions, each benchmark's median; otherwise its one run.
    medians = any(b.get("aggregate_name") == "median" for b in data["benchmarks"])
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            continue
        if medians and b.get("aggregate_name") != "median":
            continue
        if not medians and b.get("run_type") != "iteration":
            continue
        name = b["run_name"] if "run_name" in b else b["name"]
        name = name.split("/iterations:")[0]
        group, variant = name.rsplit("/", 1)
        rows.append((group, variant, b["real_time"], b.get("time_unit", "ns"), b.get("GFLOPS")))
    return rows, data.get("context", {})


def main(out_dir):
    lines = ["# cora benchmarks", ""]
    per_threads = {}
    for t in (1, 2):
        path = os.path.join(out_dir, f"threads{t}.json")
        if os.path.exists(path):
            per_threads[t] = load(path)
    if not per_threads:
        sys.exit("report.py: no threads*.json in " + out_dir)
    ctx = next(iter(per_threads.values()))[1]
    lines.append(f"Machine: {ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz; "
                 f"date {ctx.get('date', '?')}. Command: `bash bench/run.sh`. Ratio = baseline time / "
                 "time of cora's fastest variant in the group (above 1: cora is faster).")
    if os.environ.get("CORA_OPENBLAS_CORE_NOTE"):  # bench/common.sh's choice of OpenBLAS kernel
        lines.append("")
        lines.append(os.environ["CORA_OPENBLAS_CORE_NOTE"] + ".")
    for t, (rows, _) in sorted(per_threads.items()):
        lines += ["", f"## {t} thread{'s' if t > 1 else ''}", "",
                  "| group | variant | time | GFLOP/s | ratio vs cora |", "|---|---|---|---|---|"]
        # cora's time in a group: its fastest variant (vgemm measures two inner-tile strategies
        # and keeps the faster).
        best = {}
        for group, variant, time, _, _ in rows:
            if variant.startswith("cora"):
                best[group] = min(best.get(group, time), time)
        for group, variant, time, unit, gflops in rows:
            if group == "jit" or group not in best:
                ratio = "-"
            elif variant.startswith("cora"):
                ratio = "cora (kept)" if time == best[group] else "cora"
            else:
                ratio = f"{time / best[group]:.2f}x"
            g = f"{gflops:.1f}" if gflops else "-"
            lines.append(f"| {group} | {variant} | {time:.2f} {unit} | {g} | {ratio} |")
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report.py: matplotlib not installed; no plot")
        return
    panels = sorted(per_threads.items())
    fig, axes = plt.subplots(len(panels), 1, figsize=(14, 5 * len(panels)), squeeze=False)
    for ax, (t, (rows, _)) in zip(axes[:, 0], panels):
        groups = [g for g in dict.fromkeys(r[0] for r in rows) if g != "jit"]
        variants = list(dict.fromkeys(r[1] for r in rows if r[0] != "jit"))
        width = 0.8 / max(len(variants), 1)
        for vi, v in enumerate(variants):
            xs, ys = [], []
            for gi, g in enumerate(groups):
                for group, variant, _, _, gflops in rows:
                    if group == g and variant == v and gflops:
                        xs.append(gi + vi * width)
                        ys.append(gflops)
            if xs:
                ax.bar(xs, ys, width, label=v)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(groups))])
        ax.set_xticklabels(groups, rotation=20)
        ax.set_ylabel("GFLOP/s (useful work)")
        ax.set_title(f"cora vs baselines, {t} thread{'s' if t > 1 else ''}")
        ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "results.png"), dpi=90)
    print("report.py: wrote", os.path.join(out_dir, "results.png"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/results")
