"""Speed-up over the best dense convolution against mask density, one line per shape, from the
CSV of bench/spatial.cpp, as an SVG (no plotting library needed). Usage: spatial_plot.py CSV SVG"""
import csv
import math
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
W, H, L, B, T, R = 640, 420, 70, 50, 30, 150
shapes = sorted({r["shape"] for r in rows})
colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
xs = [float(r["density"]) for r in rows]
ys = [float(r["speedup_vs_best_dense"]) for r in rows] + [1.0]
xmin, xmax = math.log10(min(xs) * 0.8), math.log10(max(xs) * 1.25)
ymax = math.log10(max(ys) * 1.5)
ymin = math.log10(min(min(ys) * 0.8, 0.5))
def px(d): return L + (math.log10(d) - xmin) / (xmax - xmin) * (W - L - R)
def py(s): return H - B - (math.log10(s) - ymin) / (ymax - ymin) * (H - B - T)
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{W / 2}" y="18" text-anchor="middle">3x3 convolution over active tiles: speed-up over the best dense baseline</text>']
for d in (0.03, 0.1, 0.3, 0.5):
    out.append(f'<line x1="{px(d)}" y1="{T}" x2="{px(d)}" y2="{H - B}" stroke="#ddd"/>')
    out.append(f'<text x="{px(d)}" y="{H - B + 16}" text-anchor="middle">{d}</text>')
for s in (0.5, 1, 2, 4, 8, 16, 32):
    if ymin <= math.log10(s) <= ymax:
        out.append(f'<line x1="{L}" y1="{py(s)}" x2="{W - R}" y2="{py(s)}" stroke="#ddd"/>')
        out.append(f'<text x="{L - 6}" y="{py(s) + 4}" text-anchor="end">{s}x</text>')
out.append(f'<line x1="{L}" y1="{py(1)}" x2="{W - R}" y2="{py(1)}" stroke="#888" stroke-dasharray="4"/>')
targets = {0.5: 1.6, 0.3: 2.8, 0.1: 6.0, 0.03: 12.0}
for d, t in targets.items():
    if ymin <= math.log10(t) <= ymax:
        out.append(f'<circle cx="{px(d)}" cy="{py(t)}" r="4" fill="none" stroke="black"/>')
out.append(f'<text x="{W / 2}" y="{H - 12}" text-anchor="middle">mask density (active fraction, log scale); circles: targets</text>')
for i, s in enumerate(shapes):
    pts = sorted((float(r["density"]), float(r["speedup_vs_best_dense"])) for r in rows if r["shape"] == s)
    c = colors[i % len(colors)]
    out.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (c, " ".join(f"{px(d):.1f},{py(v):.1f}" for d, v in pts)))
    for d, v in pts:
        out.append(f'<circle cx="{px(d):.1f}" cy="{py(v):.1f}" r="3" fill="{c}"/>')
    out.append(f'<text x="{W - R + 10}" y="{T + 20 + 18 * i}" fill="{c}">{s}</text>')
out.append("</svg>")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
