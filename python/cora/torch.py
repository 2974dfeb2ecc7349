"""The transformer encoder as a PyTorch module: cora's AOT encoder kernels (apps/transformer, the
same libraries ``transformer_encoder`` runs) on packed tokens, with the weights of PyTorch's own
layers.

    layer = torch.nn.TransformerEncoderLayer(512, 8, 2048)
    encoder = cora.torch.TransformerEncoder(torch.nn.TransformerEncoder(layer, 6))
    out = encoder(tokens, offsets)   # tokens [T, 512] packed item after item; offsets [B + 1]

The same kernels are the PyTorch operator ``torch.ops.cora.encoder_layer`` (registered when
``cora.torch`` is imported), one post-LN layer from its weights as plain tensors::

    out = torch.ops.cora.encoder_layer(tokens, offsets, attn.in_proj_weight, attn.in_proj_bias,
                                       attn.out_proj.weight, attn.out_proj.bias, norm1.weight,
                                       norm1.bias, linear1.weight, linear1.bias, linear2.weight,
                                       linear2.bias, norm2.weight, norm2.bias, num_heads, gelu, causal)

Inference only: no autograd, no dropout (as ``eval()``), float32 on the CPU. The layers must be
post-LN (``norm_first=False``) with a head dim of 64 (hidden = 64 x heads, at most 32 heads), a
feed-forward width that is a multiple of 64 (at most 16384), ReLU or exact GELU, and LayerNorm eps
1e-5; anything else is a ValueError naming what differs. Sequences are at most 512 tokens. The
weights are copied into the kernels' layout when the module is built: later changes to the PyTorch
layers are not seen (build a new module).
"""
import os
import weakref

import numpy
import torch
import torch.nn.functional as F

from . import _cora
from .aot import load_library

_HEAD_DIM, _MAX_HEADS, _MAX_FF, _EPS = 64, 32, 16384, 1e-5
_KERNELS = ("qkv", "attention", "attention_causal", "out_norm", "ff1", "ff1_gelu", "ff2_norm")


def _library_dir():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib")


def _load_kernels():
    found = {}
    for name in _KERNELS:
        path = os.path.join(_library_dir(), f"libencoder_{name}.so")
        if not os.path.isfile(path):
            raise _cora.EnvironmentError(
                f"cora.torch: the encoder kernel library {path} is missing (cora was built without its apps: "
                "build with CORA_BUILD_APPS=ON and run scripts/install-python.sh)")
        found[name] = load_library(path)
    return found


def _panels(weight):
    """PyTorch's Linear weight [out, in] as the kernels read W(r, n) = weight[n, r]: column panels of
    16, [out / 16][in][16] (apps/transformer/encoder_model.h, weight_panels)."""
    out, inp = weight.shape
    w = weight.detach().to(torch.float32).reshape(out // 16, 16, inp).permute(0, 2, 1)
    return w.contiguous().reshape(-1).numpy()


def _vector(v):
    return v.detach().to(torch.float32).contiguous().numpy()


def _activation(layer):
    act = layer.activation
    if act is F.relu or isinstance(act, torch.nn.ReLU):
        return False
    if act is F.gelu or (isinstance(act, torch.nn.GELU) and getattr(act, "approximate", "none") == "none"):
        return True
    raise ValueError(f"cora.torch: activation {act!r} is not supported (ReLU or exact GELU)")


def _check_sizes(where, hidden, heads, ff):
    if hidden != heads * _HEAD_DIM or not 1 <= heads <= _MAX_HEADS:
        raise ValueError(f"{where}: hidden {hidden} with {heads} heads; the kernels take a head dim of 64 "
                         f"(hidden = 64 x heads) and at most {_MAX_HEADS} heads")
    if ff % 64 != 0 or not 64 <= ff <= _MAX_FF:
        raise ValueError(f"{where}: feed-forward width {ff}; the kernels take a multiple of 64 up to {_MAX_FF}")


class _Layer:
    """One layer's weights in the kernels' layout (matrices in column panels, vectors as they are)."""

    def __init__(self, where, heads, gelu, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias,
                 norm1_weight, norm1_bias, linear1_weight, linear1_bias, linear2_weight, linear2_bias,
                 norm2_weight, norm2_bias):
        hidden, ff = in_proj_weight.shape[1], linear1_weight.shape[0]
        _check_sizes(where, hidden, heads, ff)
        expected = {"in_proj_weight": (in_proj_weight, (3 * hidden, hidden)), "in_proj_bias": (in_proj_bias, (3 * hidden,)),
                    "out_proj_weight": (out_proj_weight, (hidden, hidden)), "out_proj_bias": (out_proj_bias, (hidden,)),
                    "norm1_weight": (norm1_weight, (hidden,)), "norm1_bias": (norm1_bias, (hidden,)),
                    "linear1_weight": (linear1_weight, (ff, hidden)), "linear1_bias": (linear1_bias, (ff,)),
                    "linear2_weight": (linear2_weight, (hidden, ff)), "linear2_bias": (linear2_bias, (hidden,)),
                    "norm2_weight": (norm2_weight, (hidden,)), "norm2_bias": (norm2_bias, (hidden,))}
        for name, (t, want) in expected.items():
            if t is None or tuple(t.shape) != want:
                got = "None" if t is None else str(tuple(t.shape))
                raise ValueError(f"{where}: {name} has shape {got}, expected {want}")
            if t.device.type != "cpu" or not t.is_floating_point():
                raise ValueError(f"{where}: {name} must be a floating-point tensor on the CPU")
        self.hidden, self.heads, self.ff, self.gelu = hidden, heads, ff, bool(gelu)
        self.wqkv, self.bqkv = _panels(in_proj_weight), _vector(in_proj_bias)
        self.wo, self.bo = _panels(out_proj_weight), _vector(out_proj_bias)
        self.g1, self.b1n = _vector(norm1_weight), _vector(norm1_bias)
        self.w1, self.b1 = _panels(linear1_weight), _vector(linear1_bias)
        self.w2, self.b2 = _panels(linear2_weight), _vector(linear2_bias)
        self.g2, self.b2n = _vector(norm2_weight), _vector(norm2_bias)

    @staticmethod
    def from_module(layer, index):
        where = f"cora.torch: layer {index}"
        if not isinstance(layer, torch.nn.TransformerEncoderLayer):
            raise TypeError(f"{where} is a {type(layer).__name__}, not an nn.TransformerEncoderLayer")
        if getattr(layer, "norm_first", False):
            raise ValueError(f"{where}: norm_first=True (pre-LN) is not supported; cora's encoder is post-LN")
        attn = layer.self_attn
        if not attn._qkv_same_embed_dim or attn.in_proj_bias is None or attn.bias_k is not None:
            raise ValueError(f"{where}: the attention must have one in-projection with biases and no bias_k/bias_v")
        _check_sizes(where, attn.embed_dim, attn.num_heads, layer.linear1.out_features)
        for norm in (layer.norm1, layer.norm2):
            if abs(norm.eps - _EPS) > 1e-12 or not norm.elementwise_affine:
                raise ValueError(f"{where}: LayerNorm eps {norm.eps} (affine {norm.elementwise_affine}); the "
                                 "kernels use eps 1e-5 with a scale and shift")
        if layer.linear1.bias is None or layer.linear2.bias is None or attn.out_proj.bias is None:
            raise ValueError(f"{where}: every linear layer needs its bias")
        return _Layer(where, attn.num_heads, _activation(layer), attn.in_proj_weight, attn.in_proj_bias,
                      attn.out_proj.weight, attn.out_proj.bias, layer.norm1.weight, layer.norm1.bias,
                      layer.linear1.weight, layer.linear1.bias, layer.linear2.weight, layer.linear2.bias,
                      layer.norm2.weight, layer.norm2.bias)


def _run(kernels, layers, tokens, offsets, causal):
    """The layers on packed tokens [T, hidden] with B + 1 offsets; returns [T, hidden]."""
    hidden = layers[0].hidden
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.shape[1] != hidden:
        raise ValueError(f"cora.torch: tokens must be a [T, {hidden}] tensor, got "
                         f"{tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__}")
    if tokens.dtype != torch.float32 or tokens.device.type != "cpu":
        raise ValueError(f"cora.torch: tokens must be float32 on the CPU, got {tokens.dtype} on {tokens.device}")
    offsets = torch.as_tensor(offsets)
    if offsets.dim() != 1 or offsets.numel() < 2 or offsets.dtype not in (torch.int32, torch.int64):
        raise ValueError("cora.torch: offsets must be B + 1 (at least 2) int32 or int64 values")
    if offsets.device.type != "cpu":
        raise ValueError(f"cora.torch: offsets must be on the CPU, got {offsets.device}")
    lengths = (offsets[1:] - offsets[:-1]).to(torch.int32).numpy()
    if int(offsets[0]) != 0 or (lengths < 0).any() or int(offsets[-1]) != tokens.shape[0]:
        raise ValueError(f"cora.torch: offsets must start at 0, never decrease and end at the token count "
                         f"{tokens.shape[0]}, got {offsets.tolist()[:8]}{'...' if offsets.numel() > 8 else ''}")
    B, NH, FB = len(lengths), layers[0].heads, layers[0].ff // 64
    k = kernels
    shape = dict(B=B, NH=NH, len=lengths)
    sizes = k["qkv"].buffer_sizes(**shape)
    rows = sizes["X"] // hidden  # tokens padded to the kernels' multiple (bulk padding)
    work = torch.zeros(3, rows, hidden)
    x, x1, attn = work[0], work[1], work[2]
    x[: tokens.shape[0]] = tokens
    qkv = torch.zeros(sizes["QKV"])
    ff = torch.zeros(k["ff1"].buffer_sizes(B=B, FB=FB, NH=NH, len=lengths)["F"])
    xn, x1n, an, qkvn, ffn = (t.numpy().reshape(-1) for t in (x, x1, attn, qkv, ff))
    attention = k["attention_causal" if causal else "attention"]
    for L in layers:
        k["qkv"](**shape, X=xn, W=L.wqkv, bias=L.bqkv, QKV=qkvn)
        attention(**shape, QKV=qkvn, A=an)
        k["out_norm"](**shape, In=an, W=L.wo, bias=L.bo, Residual=xn, gamma=L.g1, beta=L.b1n, Out=x1n)
        k["ff1_gelu" if L.gelu else "ff1"](**shape, FB=FB, X=x1n, W=L.w1, bias=L.b1, F=ffn)
        k["ff2_norm"](**shape, FB=FB, In=ffn, W=L.w2, bias=L.b2, Residual=x1n, gamma=L.g2, beta=L.b2n, Out=xn)
    return x[: tokens.shape[0]].clone()


class TransformerEncoder(torch.nn.Module):
    """PyTorch's post-LN encoder layers run by cora's kernels on packed ragged batches (see the module doc)."""

    def __init__(self, layers, causal=False):
        super().__init__()
        if isinstance(layers, torch.nn.TransformerEncoder):
            if layers.norm is not None:
                raise ValueError("cora.torch: an nn.TransformerEncoder with a final norm is not supported")
            layers = list(layers.layers)
        elif isinstance(layers, torch.nn.TransformerEncoderLayer):
            layers = [layers]
        else:
            layers = list(layers)
        if not layers:
            raise ValueError("cora.torch: no layers")
        self._layers = [_Layer.from_module(layer, i) for i, layer in enumerate(layers)]
        first = self._layers[0]
        for i, layer in enumerate(self._layers):
            if (layer.hidden, layer.heads, layer.ff) != (first.hidden, first.heads, first.ff):
                raise ValueError(f"cora.torch: layer {i} has sizes {(layer.hidden, layer.heads, layer.ff)}, layer 0 "
                                 f"{(first.hidden, first.heads, first.ff)}")
        self.hidden, self.causal = first.hidden, bool(causal)
        self._kernels = _load_kernels()

    def extra_repr(self):
        return f"layers={len(self._layers)}, hidden={self.hidden}, causal={self.causal}"

    @torch.no_grad()
    def forward(self, tokens, offsets):
        """tokens: float32 [T, hidden] on the CPU, the items' tokens one after another; offsets: B + 1
        integers (int32 or int64, cu_seqlens style), offsets[0] = 0, offsets[B] = T. Returns [T, hidden]."""
        return _run(self._kernels, self._layers, tokens, offsets, self.causal)


# torch.ops.cora.encoder_layer: one layer from plain weight tensors. Converting the weights into the
# kernels' layout takes about as long as the layer itself at batch 32, so each weight set's
# conversion is kept (at most _LAYER_CACHE_SIZE sets, oldest dropped) and used again only while it
# is provably the same data: the same tensor objects (weak references), addresses and versions (an
# in-place update bumps the version).
_operators = torch.library.Library("cora", "DEF")
_operators.define(
    "encoder_layer(Tensor tokens, Tensor offsets, Tensor in_proj_weight, Tensor in_proj_bias, "
    "Tensor out_proj_weight, Tensor out_proj_bias, Tensor norm1_weight, Tensor norm1_bias, "
    "Tensor linear1_weight, Tensor linear1_bias, Tensor linear2_weight, Tensor linear2_bias, "
    "Tensor norm2_weight, Tensor norm2_bias, int num_heads, bool gelu=False, bool causal=False) -> Tensor")
_layer_cache = {}
_LAYER_CACHE_SIZE = 64
_op_kernels = []


def _encoder_layer(tokens, offsets, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, norm1_weight,
                   norm1_bias, linear1_weight, linear1_bias, linear2_weight, linear2_bias, norm2_weight, norm2_bias,
                   num_heads, gelu=False, causal=False):
    weights = (in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, norm1_weight, norm1_bias, linear1_weight,
               linear1_bias, linear2_weight, linear2_bias, norm2_weight, norm2_bias)
    key = tuple(id(w) for w in weights) + (num_heads, gelu)
    state = [(w.data_ptr(), w._version) for w in weights]
    entry = _layer_cache.get(key)
    if entry is None or any(r() is not w for r, w in zip(entry[0], weights)) or entry[1] != state:
        with torch.no_grad():
            layer = _Layer("torch.ops.cora.encoder_layer", num_heads, gelu, *weights)
        _layer_cache.pop(key, None)
        if len(_layer_cache) >= _LAYER_CACHE_SIZE:
            _layer_cache.pop(next(iter(_layer_cache)))
        entry = _layer_cache[key] = ([weakref.ref(w) for w in weights], state, layer)
    if not _op_kernels:
        _op_kernels.append(_load_kernels())
    return _run(_op_kernels[0], [entry[2]], tokens, offsets, causal)


_operators.impl("encoder_layer", _encoder_layer, "CPU")
