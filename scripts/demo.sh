#!/usr/bin/env bash
# Sets up a fresh Debian machine, builds cora and runs its main job: the transformer encoder
# (6 layers, the CoRA paper's sizes) on its built-in ragged batches, built ahead of time, checked
# against a reference and timed against the same kernels on the padded batches.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build --target transformer_encoder -j "$(nproc)"
./build/apps/transformer/transformer_encoder "$@"
