"""cora.torch.TransformerEncoder against PyTorch's nn.TransformerEncoder: the same weights, each item
run by PyTorch alone (no padding, no mask), every token within 1e-4 relative."""
import pytest

torch = pytest.importorskip("torch")
import cora  # noqa: E402
import cora.torch  # noqa: E402


def reference(encoder, tokens, lengths, causal):
    outs, at = [], 0
    with torch.no_grad():
        for n in lengths:
            if n:
                mask = torch.nn.Transformer.generate_square_subsequent_mask(n) if causal else None
                outs.append(encoder(tokens[None, at:at + n], mask=mask)[0])
            at += n
    return torch.cat(outs) if outs else tokens[:0]


def make(layers, hidden, heads, ff, activation, seed):
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(hidden, heads, ff, activation=activation, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()
    with torch.no_grad():  # LayerNorms not exactly 1 and 0, so the check sees them applied
        for p in encoder.parameters():
            if p.dim() == 1:
                p.add_(0.05 * torch.randn_like(p))
    return encoder


@pytest.mark.parametrize("layers,hidden,heads,ff,activation,causal,lengths", [
    (2, 128, 2, 256, "relu", False, [1, 48, 49, 16, 17, 3, 64]),
    (1, 64, 1, 128, "gelu", True, [5, 0, 33, 1]),
    (1, 512, 8, 2048, "relu", False, [40]),  # a batch of one, the CoRA model's sizes
    (3, 64, 1, 64, "relu", True, [2] * 20),
])
def test_encoder_matches_pytorch(layers, hidden, heads, ff, activation, causal, lengths):
    encoder = make(layers, hidden, heads, ff, activation, seed=layers * 7 + heads)
    ours = cora.torch.TransformerEncoder(encoder, causal=causal)
    tokens = torch.randn(sum(lengths), hidden)
    offsets = torch.tensor([0] + lengths).cumsum(0)
    got = ours(tokens, offsets.to(torch.int32))
    want = reference(encoder, tokens, lengths, causal)
    assert got.shape == tokens.shape and torch.isfinite(got).all()
    keep = torch.cat([torch.full((n,), n > 0, dtype=torch.bool) for n in lengths])
    err = ((got[keep] - want).abs() / want.abs().clamp(min=1.0)).max().item()
    assert err <= 1e-4, err


def test_encoder_rejects_what_it_cannot_run():
    layer = torch.nn.TransformerEncoderLayer(64, 1, 64, batch_first=True, norm_first=True)
    with pytest.raises(ValueError, match="norm_first=True"):
        cora.torch.TransformerEncoder(layer)
    with pytest.raises(ValueError, match="head dim of 64"):
        cora.torch.TransformerEncoder(torch.nn.TransformerEncoderLayer(64, 2, 64))
    with pytest.raises(ValueError, match="feed-forward width 100"):
        cora.torch.TransformerEncoder(torch.nn.TransformerEncoderLayer(64, 1, 100))
    with pytest.raises(ValueError, match="eps"):
        cora.torch.TransformerEncoder(torch.nn.TransformerEncoderLayer(64, 1, 64, layer_norm_eps=1e-6))
    ours = cora.torch.TransformerEncoder(torch.nn.TransformerEncoderLayer(64, 1, 64).eval())
    with pytest.raises(ValueError, match=r"\[T, 64\]"):
        ours(torch.zeros(3, 32), torch.tensor([0, 3]))
    with pytest.raises(ValueError, match="end at the token count 3"):
        ours(torch.zeros(3, 64), torch.tensor([0, 2]))
    with pytest.raises(ValueError, match="never decrease"):
        ours(torch.zeros(3, 64), torch.tensor([0, 4, 3]))
    with pytest.raises(cora.RuntimeError, match="len"):  # a sequence past the kernels' 512
        ours(torch.zeros(513, 64), torch.tensor([0, 513]))


def test_operator_matches_the_module_and_sees_weight_updates():
    encoder = make(1, 128, 2, 256, "gelu", seed=3)
    layer = encoder.layers[0]
    attn = layer.self_attn
    lengths = [7, 0, 30]
    tokens = torch.randn(sum(lengths), 128)
    offsets = torch.tensor([0] + lengths).cumsum(0)

    def op(causal):
        return torch.ops.cora.encoder_layer(tokens, offsets, attn.in_proj_weight, attn.in_proj_bias,
                                            attn.out_proj.weight, attn.out_proj.bias, layer.norm1.weight,
                                            layer.norm1.bias, layer.linear1.weight, layer.linear1.bias,
                                            layer.linear2.weight, layer.linear2.bias, layer.norm2.weight,
                                            layer.norm2.bias, 2, True, causal)

    for causal in (False, True):
        want = cora.torch.TransformerEncoder(encoder, causal=causal)(tokens, offsets)
        assert torch.equal(op(causal), want)
    with torch.no_grad():
        layer.linear2.bias.add_(1.0)  # in place: the op must not reuse the old conversion
    updated = reference(encoder, tokens, lengths, True)
    got = op(True)
    keep = torch.cat([torch.full((n,), n > 0, dtype=torch.bool) for n in lengths])
    assert ((got[keep] - updated).abs() / updated.abs().clamp(min=1.0)).max().item() <= 1e-4
    with pytest.raises(ValueError, match="linear1_bias has shape"):
        torch.ops.cora.encoder_layer(tokens, offsets, attn.in_proj_weight, attn.in_proj_bias, attn.out_proj.weight,
                                     attn.out_proj.bias, layer.norm1.weight, layer.norm1.bias, layer.linear1.weight,
                                     layer.linear2.bias, layer.linear2.weight, layer.linear2.bias,
                                     layer.norm2.weight, layer.norm2.bias, 2, True, False)
