#!/usr/bin/env bash
# Installs the Python package `cora` for Debian's python3 (/usr/bin/python3, the interpreter of
# python3-numpy and python3-torch), offline from Debian packages: the packages (scripts/install-deps.sh),
# a release build of the extension module and the encoder's kernel libraries, then a copy of the
# package into that interpreter's site directory (/usr/local/lib/python3.X/dist-packages).
#   bash scripts/install-python.sh            then: python3 -c "import cora"
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# > 0)); then
  echo "install-python.sh: takes no arguments, got $*" >&2
  exit 2
fi
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCORA_BUILD_PYTHON=ON
cmake --build build -j "$(nproc)" --target cora_python
install_for() { # $1: an interpreter; copies the package into its site directory, then imports it
  local site
  site=$("$1" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
  mkdir -p "$site"
  rm -rf "$site/cora.tmp"
  cp -r build/python/cora "$site/cora.tmp"
  rm -rf "$site/cora"
  mv "$site/cora.tmp" "$site/cora"
  (cd / && "$1" -c 'import cora; print("install-python.sh: cora installed for '"$1"' in", cora.__path__[0])')
}
install_for /usr/bin/python3
/usr/bin/python3 -c 'import cora.torch' # numpy and torch: Debian's, for this interpreter
# A `python3` earlier on PATH (pyenv, a venv) that is another CPython of the same version can load
# the same module: install there too, so that `python3 -c "import cora"` works as typed. NumPy and
# PyTorch arrays need those packages in that interpreter (cora itself does not).
on_path=$(command -v python3 || true)
version() { "$1" -c 'import sys, sysconfig; print(sys.implementation.name, sysconfig.get_config_var("EXT_SUFFIX"))'; }
if [[ -n "$on_path" && "$(readlink -f "$on_path")" != "$(readlink -f /usr/bin/python3)" ]] &&
  [[ "$(version "$on_path" 2>/dev/null)" == "$(version /usr/bin/python3)" ]]; then
  install_for "$on_path"
fi
