#!/usr/bin/python3
"""cora's transformer encoder against PyTorch's nn.TransformerEncoder (eval, fp32), same weights and
lengths: every real token's output agrees within 1e-4 relative. Full and causal attention, ReLU and
GELU; the CPU kernels and the GPU schedules (--device cuda-emulated: the same device code a GPU runs,
emulated on the CPU), which must also agree with each other within 1e-5. Usage: encoder_vs_pytorch.py ENCODER_BINARY EXPORT_WEIGHTS_DIR WORK_DIR.
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
import export_weights  # noqa: E402

os.makedirs(work, exist_ok=True)
torch.set_num_threads(2)
# Lengths 1, the token padding 48 and one past it, 16 and 17, a longer one, in one batch (PyTorch
# cannot run an item of length 0: every key of its rows is masked).
LENGTHS = [1, 48, 49, 16, 17, 3, 64]
failed = False
for layers, heads, ff, gelu, causal in [(2, 2, 256, False, False), (3, 1, 128, True, True), (1, 8, 2048, False, False)]:
    hidden = 64 * heads
    enc = export_weights.make_encoder(layers, hidden, heads, ff, gelu, seed=layers)
    wpath, lpath, xpath, opath = (os.path.join(work, n) for n in ("w.bin", "lengths.txt", "x.bin", "out.bin"))
    export_weights.write_weights(enc, wpath)
    with open(lpath, "w") as f:
        f.write(" ".join(map(str, LENGTHS)) + "\n")
    gen = torch.Generator().manual_seed(7)
    tokens = torch.randn(sum(LENGTHS), hidden, generator=gen)
    tokens.numpy().astype("<f4").tofile(xpath)
    outputs = {}
    for device in ("cpu", "cuda-emulated"):
        cmd = [binary, "--weights", wpath, "--lengths", lpath, "--input", xpath, "--dump", opath, "--batch",
               str(len(LENGTHS)), "--batches", "1", "--runs", "1", "--no-check", "--device", device]
        subprocess.run(cmd + (["--causal"] if causal else []), check=True, stdout=subprocess.DEVNULL)
        outputs[device] = torch.from_numpy(numpy.fromfile(opath, dtype="<f4")).reshape(-1, hidden)

    # PyTorch on the padded batch with a key padding mask (and the causal mask).
    B, L = len(LENGTHS), max(LENGTHS)
    padded = torch.zeros(B, L, hidden)
    pad_mask = torch.ones(B, L, dtype=torch.bool)
    at = 0
    for b, n in enumerate(LENGTHS):
        padded[b, :n] = tokens[at:at + n]
        pad_mask[b, :n] = False
        at += n
    mask = torch.nn.Transformer.generate_square_subsequent_mask(L) if causal else None
    with torch.no_grad():
        want = enc(padded, mask=mask, src_key_padding_mask=pad_mask)
    want_packed = torch.cat([want[b, :n] for b, n in enumerate(LENGTHS)])

    def rel_error(got, want):  # NaN anywhere makes it NaN, which fails every bound
        return ((got - want).abs() / want.abs().clamp(min=1.0)).max().item()

    model = (f"layers {layers}, hidden {hidden}, heads {heads}, ff {ff}, {'GELU' if gelu else 'ReLU'}, "
             f"{'causal' if causal else 'full'}")
    for device, got in outputs.items():
        err = rel_error(got, want_packed)
        ok = err <= 1e-4
        failed |= not ok
        print(f"{model}, {device}: max relative error vs PyTorch {err:.2e} {'PASS' if ok else 'FAIL'}")
    err = rel_error(outputs["cuda-emulated"], outputs["cpu"])
    ok = err <= 1e-5
    failed |= not ok
    print(f"{model}: GPU schedules (emulated) vs CPU kernels {err:.2e} {'PASS' if ok else 'FAIL'}")
sys.exit(1 if failed else 0)
