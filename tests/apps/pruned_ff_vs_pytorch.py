#!/usr/bin/python3
"""cora's pruned feed-forward block (apps/sparse/pruned_ff) against PyTorch: the same pruned nn.Linear
layers, exported with to_sparse_bsr (apps/sparse/export_bsr.py), the same ragged tokens; every
output agrees within 1e-4 relative. Usage: pruned_ff_vs_pytorch.py PRUNED_FF_BINARY EXPORT_DIR WORK_DIR.
Exit 0: pass; 1: mismatch; 77: PyTorch is not installed (reported as skipped)."""
import os
import subprocess
import sys

try:
    import numpy
    import torch
except ImportError:
    print("SKIPPED: python3 cannot import torch (install python3-torch)")
    sys.exit(77)

binary, export_dir, work = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, export_dir)
import export_bsr  # noqa: E402

os.makedirs(work, exist_ok=True)
torch.set_num_threads(2)
LENGTHS = [0, 1, 24, 25, 7, 60]  # empty, one token, the token chunk and one past it, longer
failed = False
for hidden, ff, block, density, bias in [(64, 128, 8, 0.4, True), (96, 192, 32, 0.5, False), (64, 64, 16, 1.0, True)]:
    lin1, lin2 = export_bsr.make_pruned_ff(hidden, ff, block, density, bias, seed=block)
    wpath, lpath, xpath, opath = (os.path.join(work, n) for n in ("w.bin", "lengths.txt", "x.bin", "out.bin"))
    export_bsr.write_bsr_weights(lin1, lin2, block, wpath)
    with open(lpath, "w") as f:
        f.write(" ".join(map(str, LENGTHS)) + "\n")
    x = torch.randn(sum(LENGTHS), hidden, generator=torch.Generator().manual_seed(3))
    x.numpy().astype("<f4").tofile(xpath)
    cmd = [binary, "--weights", wpath, "--lengths", lpath, "--input", xpath, "--dump", opath, "--batch",
           str(len(LENGTHS)), "--runs", "1"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    got = torch.from_numpy(numpy.fromfile(opath, dtype="<f4")).reshape(-1, hidden)
    with torch.no_grad():
        want = lin2(torch.relu(lin1(x)))
    err = ((got - want).abs() / want.abs().clamp(min=1.0)).max().item() if want.numel() else 0.0
    ok = got.shape == want.shape and err <= 1e-4
    print(f"hidden {hidden}, ff {ff}, {block}x{block} blocks at {density:.0%}, bias {bias}: "
          f"max relative error {err:.2e} {'PASS' if ok else 'FAIL'}")
    failed |= not ok
sys.exit(1 if failed else 0)
