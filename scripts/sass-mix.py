#!/usr/bin/env python3
"""The instruction mix of cora's compiled GPU kernels, from the SASS (cuobjdump -sass).

Reads every NVRTC record in a cora kernel cache (CORA_CACHE_DIR: files k<key>.bin holding the tag
line "cora-nvrtc-record 1", then the cubin, PTX and log, each as "<size>\\n<bytes>"), disassembles
each cubin and prints one markdown row per kernel (and record: the first 8 hex digits of its cache
key) whose name contains FILTER: instructions, FFMA and
HMMA (the arithmetic), shared and global loads (and how many are 128-bit), and the 64-bit integer
work (IMAD.WIDE, the carry halves .X of 64-bit adds, 64-bit compares .EX). Used by gpu-check.sh on
a GPU machine (cuobjdump comes with CUDA); a machine without cuobjdump gets one line and exit 77.
    python3 sass-mix.py CACHE_DIR [FILTER ...]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

TAG = b"cora-nvrtc-record 1\n"


def cubin_of(record):
    """The cubin of one record, or None when the framing does not hold."""
    if not record.startswith(TAG):
        return None
    pos = len(TAG)
    end = record.index(b"\n", pos)
    size = int(record[pos:end])
    return record[end + 1 : end + 1 + size]


def mix(sass):
    """{kernel name: Counter of instruction classes} of one cuobjdump -sass listing."""
    kernels = {}
    name = None
    for line in sass.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            name = m.group(1)
            kernels[name] = Counter()
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);", line)
        if not m or name is None:
            continue
        op, operands = m.group(1), m.group(2)
        c = kernels[name]
        c["instructions"] += 1
        base = op.split(".")[0]
        if base in ("FFMA", "HMMA"):
            c[base] += 1
        if base in ("LDS", "LDG", "LDSM", "LDGSTS"):
            c[base] += 1
            if ".128" in op:
                c[base + ".128"] += 1
        parts = op.split(".")
        if op.startswith("IMAD.WIDE") or "X" in parts[1:] or "EX" in parts[1:] or op.startswith("IADD.64"):
            c["int64"] += 1
    return kernels


def main(argv):
    if len(argv) < 2 or argv[1].startswith("-"):
        print("usage: sass-mix.py CACHE_DIR [FILTER ...]", file=sys.stderr)
        return 2
    cache, filters = argv[1], argv[2:]
    if not os.path.isdir(cache):
        print(f"sass-mix: no kernel cache at {cache}", file=sys.stderr)
        return 2
    tool = shutil.which("cuobjdump") or ("/usr/local/cuda/bin/cuobjdump"
                                         if os.path.exists("/usr/local/cuda/bin/cuobjdump") else None)
    if not tool:
        print("SKIPPED: sass-mix needs cuobjdump (CUDA's binary tools)")
        return 77
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for f in sorted(os.listdir(cache)):
            if not f.endswith(".bin"):
                continue
            with open(os.path.join(cache, f), "rb") as fh:
                cubin = cubin_of(fh.read())
            if not cubin:
                continue
            path = os.path.join(tmp, "k.cubin")
            with open(path, "wb") as out:
                out.write(cubin)
            r = subprocess.run([tool, "-sass", path], capture_output=True, text=True)
            if r.returncode != 0:
                continue
            arch = re.search(r"(?:arch = |code for )(sm_\d+a?)", r.stdout)
            for name, c in mix(r.stdout).items():
                if filters and not any(x in name for x in filters):
                    continue
                # Two programs may hold kernels of one name (tile sizes, 64- and 32-bit builds):
                # the record's key tells them apart.
                rows[(name, arch.group(1) if arch else "?", f[1:9])] = c
    cols = ["instructions", "FFMA", "HMMA", "LDS", "LDS.128", "LDG", "LDG.128", "LDSM", "LDGSTS", "int64"]
    print("| kernel | arch | record | " + " | ".join(cols) + " |")
    print("|---|---|---|" + "---|" * len(cols))
    for (name, arch, record), c in sorted(rows.items()):
        print(f"| {name} | {arch} | {record} | " + " | ".join(str(c[k]) for k in cols) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
