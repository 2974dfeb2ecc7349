#!/usr/bin/env bash
# Sets up a fresh Debian machine, builds cora and runs the most complete example: ragged
# attention scores + softmax on real sequence lengths, checked and timed against padding.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build --target ragged_attention -j "$(nproc)"
./build/apps/attention/ragged_attention "$@"
