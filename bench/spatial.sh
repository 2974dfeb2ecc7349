#!/usr/bin/env bash
# Spatially sparse 3x3 convolutions against dense ones (bench/spatial.cpp): cora over the active
# tiles of blob-shaped masks at densities 0.5, 0.3, 0.1 and 0.03, against oneDNN's convolution,
# PyTorch's conv2d (bench/spatial_torch.py) and cora's dense schedule, 2 threads, in one run.
# Writes bench/results/spatial.md (the table), spatial.csv and spatial.svg (speed-up against
# density), and spatial_tiles.txt (the measured tile-size table, apps/spatial/tile_table.h). Environment: CORA_BENCH_BUILD_DIR (default build-bench), CORA_BUILD_JOBS (default 1),
# CORA_BENCH_RUNS (default 5: the best of that many calls per variant).
# Usage: bash bench/spatial.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
build_bench_targets cora_spatial
fair_openblas_core # PyTorch's CPU conv does not use OpenBLAS, but its other ops do: the same rule

mkdir -p bench/results
runs=${CORA_BENCH_RUNS:-5}
torch_times=$(mktemp)
table=$(mktemp)
trap 'rm -f "$torch_times" "$table"' EXIT
OMP_NUM_THREADS=2 /usr/bin/python3 bench/spatial_torch.py --runs "$runs" "$@" > "$torch_times" || true
torch_version=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo "not importable")
OMP_NUM_THREADS=2 CORA_NUM_THREADS=2 "./$build/bench/cora_spatial" --markdown="$table" \
  --csv=bench/results/spatial.csv --torch="$torch_times" --tile-table=bench/results/spatial_tiles.txt \
  --runs="$runs" "$@"
/usr/bin/python3 bench/spatial_plot.py bench/results/spatial.csv bench/results/spatial.svg

describe_machine
{
  echo "# Spatially sparse convolutions vs dense ones"
  echo
  echo "Written by \`bash bench/spatial.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'); CPU: $cpu ($(nproc) cores;" \
    "${isa% }); cora $commit; 2 threads; PyTorch $torch_version."
  echo
  echo "A 3x3 convolution (stride 1, padding 1, bias; NHWC, fp32, C channels in and out) computed only on" \
    "the active tiles of a blob-shaped mask (random discs: \"globally sparse, locally dense\"; the density" \
    "asked for, then the one drawn), against the same convolution computed densely: oneDNN's" \
    "\`convolution_forward\` (the implementation named below; what PyTorch's CPU conv2d calls), PyTorch's" \
    "\`conv2d\` (the faster of NCHW and channels_last) and cora's own dense schedule (the same inner code over" \
    "every tile). Times are the best of $runs calls; ratios come from one run of the program. The best" \
    "tile is the fastest of 8x8, 4x8, 16x8, 2x8, 1x8 and 4x10 tiles (rows x columns) for that mask, measured in the same run." \
    "\"Direct\" reads each tile's inputs from the dense tensor (zero padding as a select, left out of the taps" \
    "that stay inside the image: specialize_interior); \"gather-scatter\"" \
    "first copies every active tile with its halo into a gathered tensor, then convolves it with no bounds" \
    "checks and writes each tile's positions (SIGE and SBNet's route; its best tile size in parentheses)." \
    "The speed-up and the target compare the faster of the two routes with the fastest dense baseline;" \
    "bench/results/spatial_tiles.txt keeps the direct route's fastest tile per shape and density band" \
    "(apps/spatial/tile_table.h; the app's --tile auto --tile-table FILE reads it)." \
    "\"Mask to list\" is binding the uint8 mask to the shape and building its tile list (the prelude's" \
    "work per batch), in % of the sparse convolution. Every sparse output is checked against the dense one" \
    "on the active tiles."
  echo
  cat "$table"
  echo
  echo "![speed-up against density](spatial.svg)"
} > bench/results/spatial.md
echo "wrote bench/results/spatial.md, spatial.csv, spatial.svg"
