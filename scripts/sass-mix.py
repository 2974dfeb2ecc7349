#!/usr/bin/env python3
"""The instruction mix of cora's compiled GPU kernels, from the SASS (cuobjdump -sass).

Reads every NVRTC record in a cora kernel cache (CORA_CACHE_DIR: files k<key>.bin holding the tag
line "cora-nvrtc-record 1", then the cubin, PTX and log, each as "<size>\\n<bytes>"), disassembles
each cubin and prints one markdown row per kernel (and record: the first 8 hex digits of its cache
key) whose name contains FILTER: instructions, FFMA and
HMMA (the arithmetic), shared and global loads (and how many are 128-bit), and the 64-bit integer
work (IMAD.WIDE, the carry halves .X of 64-bit adds, 64-bit compares .EX). Used by gpu-check.sh on
a GPU machine (cuobjdump comes with CUDA); a machine without cuobjdump gets one line and exit 77.
    python3 sass-mix.py CACHE_DIR [FILTER ...] [--require KERNEL:COLUMN>N ...]
--require (repeatable): every kernel whose name ends with KERNEL must have COLUMN > N (or < N, or
= N) in every record that holds it, and at least one record must hold it; otherwise exit 1 with
the rows that fail. gpu-check.sh asserts with it that the 32-bit vgemm kernel's copies are
LDG.E.128 and that it has a fraction of the 64-bit kernel's 64-bit integer work.
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


def parse_requirement(text):
    """KERNEL:COLUMN>N (or <, =) as (kernel, column, op, n); ValueError when malformed."""
    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*):([A-Za-z0-9.]+)([<>=])(\d+)", text)
    if not m:
        raise ValueError(f"--require takes KERNEL:COLUMN>N, KERNEL:COLUMN<N or KERNEL:COLUMN=N, got '{text}'")
    return m.group(1), m.group(2), m.group(3), int(m.group(4))


def failures(rows, requirements):
    """The requirements that the rows {(name, arch, record): Counter} do not meet, as lines."""
    bad = []
    for kernel, column, op, n in requirements:
        held = [(key, c) for key, c in rows.items() if key[0].endswith(kernel)]
        if not held:
            bad.append(f"no kernel named ...{kernel} in the cache")
        for (name, arch, record), c in held:
            v = c[column]
            ok = v > n if op == ">" else v < n if op == "<" else v == n
            if not ok:
                bad.append(f"{name} ({arch}, record {record}): {column} is {v}, expected {op} {n}")
    return bad


def main(argv):
    args, requirements = [], []
    i = 1
    while i < len(argv):
        if argv[i] == "--require" and i + 1 < len(argv):
            try:
                requirements.append(parse_requirement(argv[i + 1]))
            except ValueError as e:
                print(f"sass-mix: {e}", file=sys.stderr)
                return 2
            i += 2
        elif argv[i].startswith("-"):
            print(f"sass-mix: unknown option '{argv[i]}' (usage: sass-mix.py CACHE_DIR [FILTER ...] "
                  "[--require KERNEL:COLUMN>N ...])", file=sys.stderr)
            return 2
        else:
            args.append(argv[i])
            i += 1
    if not args:
        print("usage: sass-mix.py CACHE_DIR [FILTER ...] [--require KERNEL:COLUMN>N ...]", file=sys.stderr)
        return 2
    cache, filters = args[0], args[1:]
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
    bad = failures(rows, requirements)
    for line in bad:
        print(f"sass-mix: FAILED: {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
