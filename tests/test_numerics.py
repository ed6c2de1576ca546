"Numerics under odd masks and reduced precision (issue: faults and bad input, point 6)."
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st, HealthCheck

from annotated_transformer.attention import scaled_dot_product_attention, fused_attention, MultiHeadAttention
from annotated_transformer.model import create_transformer
from annotated_transformer.embeddings import PAD_IDX


@st.composite
def attention_case(draw):
    b, h = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    q_len, k_len, d = draw(st.integers(1, 7)), draw(st.integers(1, 7)), draw(st.sampled_from([1, 2, 4, 8, 16]))
    seed = draw(st.integers(0, 2**31 - 1))
    # mask shape: any broadcastable combination of (b|1, h|1, q|1, k)
    shape = (draw(st.sampled_from([1, b])), draw(st.sampled_from([1, h])), draw(st.sampled_from([1, q_len])), k_len)
    p_keep = draw(st.floats(0.0, 1.0))
    return b, h, q_len, k_len, d, shape, p_keep, seed


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(attention_case())
def test_explicit_attention_equals_sdpa_where_a_key_is_visible(case):
    b, h, q_len, k_len, d, shape, p_keep, seed = case
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(b, h, n, d, generator=g) for n in (q_len, k_len, k_len))
    mask = torch.rand(shape, generator=g) < p_keep
    ours, w = scaled_dot_product_attention(q, k, v, mask)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    visible = mask.expand(b, h, q_len, k_len).any(-1)              # rows with at least one key
    assert torch.isfinite(ours).all() and torch.isfinite(w).all()
    torch.testing.assert_close(ours[visible], ref[visible], atol=1e-5, rtol=1e-5)
    assert (ours[~visible] == 0).all()                              # nothing visible -> zero output
    torch.testing.assert_close(fused_attention(q, k, v, mask)[visible], ours[visible], atol=1e-5, rtol=1e-5)


def test_fully_masked_rows_finite_forward_and_backward_in_both_paths():
    torch.manual_seed(0)
    mask = torch.zeros(2, 1, 3, 5, dtype=torch.bool)
    mask[0, 0, 0, :2] = True                                       # one row sees two keys; all others see none
    for fused in (True, False):
        mha = MultiHeadAttention(16, 4, fused=fused)
        x = torch.randn(2, 3, 16, requires_grad=True)
        mem = torch.randn(2, 5, 16, requires_grad=True)
        out = mha(x, mem, mem, mask)
        out.pow(2).sum().backward()
        assert torch.isfinite(out).all()
        assert torch.isfinite(x.grad).all() and torch.isfinite(mem.grad).all()
        assert all(torch.isfinite(p.grad).all() for p in mha.parameters())


def test_all_padding_rows_give_finite_outputs_and_gradients():
    torch.manual_seed(0)
    model = create_transformer(20, 20, "tiny")
    src = torch.tensor([[1, 5, 6, 2], [PAD_IDX] * 4])              # second source is all padding
    tgt = torch.tensor([[1, 7, 8], [PAD_IDX] * 3])
    out = model(src, tgt, model.make_src_mask(src), model.make_tgt_mask(tgt))
    logp = model.generator(out)
    logp.sum().backward()
    assert torch.isfinite(logp).all()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_reduced_precision_forward_is_finite():
    torch.manual_seed(0)
    model = create_transformer(20, 20, "tiny").eval()
    src = torch.tensor([[1, 5, 6, 2, 0, 0], [1, 5, 2, 0, 0, 0]])
    tgt = torch.tensor([[1, 7, 8, 0], [1, 9, 0, 0]])
    for dtype in (torch.bfloat16,):
        with torch.autocast("cpu", dtype=dtype):
            out = model.generator(model(src, tgt, model.make_src_mask(src), model.make_tgt_mask(tgt)))
        assert torch.isfinite(out).all()
    half = create_transformer(20, 20, "tiny").eval().to(torch.bfloat16)
    out = half.generator(half(src, tgt, half.make_src_mask(src), half.make_tgt_mask(tgt)))
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
