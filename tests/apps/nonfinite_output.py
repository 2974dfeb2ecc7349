"""An app's self-check fails when its output is NaN where the reference is finite.

The encoder gets inputs of magnitude 1e20: its float32 attention scores overflow (inf - inf is NaN
in the softmax) while the double-precision reference stays finite. The check must print FAIL and
exit 1; before the fix, `std::max(err, NaN)` kept err at 0 and the check printed PASS.
Usage: nonfinite_output.py <transformer_encoder> <lengths file> <work dir>"""
import math
import os
import random
import struct
import subprocess
import sys

encoder, lengths_file, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
lengths = [int(x) for x in open(lengths_file).read().split()][:3]
hidden = 64  # --heads 1
rng = random.Random(3)
inp, out = os.path.join(work, "overflow_input.bin"), os.path.join(work, "output.bin")
with open(inp, "wb") as f:
    f.write(b"".join(struct.pack("<f", rng.uniform(-1, 1) * 1e20) for _ in range(sum(lengths) * hidden)))
cmd = [encoder, "--layers", "1", "--heads", "1", "--ff", "64", "--batch", "3", "--batches", "1", "--runs", "1",
       "--lengths", lengths_file, "--input", inp, "--dump", out]
r = subprocess.run(cmd, capture_output=True, text=True)
print(r.stdout + r.stderr)
data = open(out, "rb").read()
values = struct.unpack("<%df" % (len(data) // 4), data)
nans = sum(1 for v in values if math.isnan(v))
print(f"exit status {r.returncode}; {nans} of {len(values)} output values are NaN")
failed = []
if nans == 0:
    failed.append("the output holds no NaN: the test's input no longer overflows (make it larger)")
if r.returncode != 1:
    failed.append(f"expected exit status 1, got {r.returncode}")
if "FAIL" not in r.stdout or "NaN or infinite where the reference is not" not in r.stdout:
    failed.append("the check line does not say FAIL and name the non-finite values")
for f in failed:
    print("FAILED: " + f)
sys.exit(1 if failed else 0)
