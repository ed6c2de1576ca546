"Numerics under odd masks and reduced precision (faults and bad input, point 6); masks and losses at the edges (issue 11, item 5)."
import copy
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st, HealthCheck

from annotated_transformer.attention import scaled_dot_product_attention, fused_attention, MultiHeadAttention
from annotated_transformer.fast_model import make_fast, ModelLevers
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
    for fused in (True, False):                                    # the paper's layer; the fast one, explicit
        mha = MultiHeadAttention(16, 4) if fused else make_fast(MultiHeadAttention(16, 4), ModelLevers(fused_kernel=False))
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


# ---- issue 11, item 5: the attention paths accept exactly the masks check_mask accepts --------------------------

from annotated_transformer.attention import check_mask


@st.composite
def mask_shape_case(draw):
    "Scores (batch, heads, q_len, k_len) and a mask shape of rank 0-5 whose every dim is 1, the full size or a wrong size."
    full = (draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    rank = draw(st.integers(0, 5))
    shape = []
    for i in range(rank):
        size = full[i - rank] if rank - i <= 4 else 2        # a fifth, leading dim has no counterpart in the scores
        kind = draw(st.sampled_from(["one", "full", "wrong"]))
        shape.append(1 if kind == "one" else size if kind == "full" else size + draw(st.integers(1, 2)))
    return full, tuple(shape), draw(st.floats(0.0, 1.0)), draw(st.integers(0, 2**31 - 1))


def _attempt(fn):
    try: return fn(), None
    except (ValueError, RuntimeError, IndexError) as e: return None, e


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mask_shape_case())
def test_check_mask_accepts_exactly_what_both_attention_paths_accept(case):
    (b, h, q_len, k_len), shape, p_keep, seed = case
    d = 4
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(b, h, n, d, generator=g) for n in (q_len, k_len, k_len))
    mask = torch.rand(shape, generator=g) < p_keep
    # the documented rule, written out independently of check_mask: rank ≤ 4 and each dim 1 or the full size
    rule = len(shape) <= 4 and all(m in (1, s) for m, s in zip(shape[::-1], (b, h, q_len, k_len)[::-1]))
    _, check_err = _attempt(lambda: check_mask(mask, (b, h, q_len, k_len)))
    explicit, explicit_err = _attempt(lambda: scaled_dot_product_attention(q, k, v, mask)[0])
    fused, fused_err = _attempt(lambda: fused_attention(q, k, v, mask))
    mhas = {}
    torch.manual_seed(seed % 1000)
    paper = MultiHeadAttention(h * d, h).eval()                    # the fused kernel
    explicit_mha = make_fast(copy.deepcopy(paper), ModelLevers(fused_kernel=False))   # the fast twin, explicit
    x, mem = torch.randn(b, q_len, h * d, generator=g), torch.randn(b, k_len, h * d, generator=g)
    for fused_path, mha in ((True, paper), (False, explicit_mha)):
        mhas[fused_path] = _attempt(lambda: mha(x, mem, mem, mask))
    accepted = check_err is None
    assert accepted == rule, f"check_mask {'accepted' if accepted else 'refused'} {shape} for scores {(b, h, q_len, k_len)}"
    outcomes = {"explicit": explicit_err, "fused": fused_err, "MHA fused": mhas[True][1], "MHA explicit": mhas[False][1]}
    for name, err in outcomes.items():
        assert (err is None) == accepted, f"{name} path {'refused' if err else 'accepted'} mask {shape} (check_mask: {check_err}): {err}"
        if err is not None:                                   # the same clear error as check_mask, whatever the path
            assert isinstance(err, ValueError) and "does not broadcast" in str(err), f"{name}: {err!r}"
    if accepted:
        assert explicit.shape == fused.shape == (b, h, q_len, d)
        assert torch.isfinite(explicit).all() and torch.isfinite(fused).all()
        torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)   # fully masked rows: zeros in both
        torch.testing.assert_close(mhas[True][0], mhas[False][0], atol=1e-5, rtol=1e-5)


# ---- issue 11, item 5: the label-smoothed loss for any log-probabilities, -inf entries included ----------------------

import math
from annotated_transformer.regularization import LabelSmoothingLoss


@st.composite
def loss_case(draw):
    V = draw(st.integers(3, 40))
    return dict(V=V, n=draw(st.integers(1, 8)), pad=draw(st.integers(0, V - 1)),
                eps=draw(st.sampled_from([0.0, 0.5]) | st.floats(0.0, 0.5)),
                p_inf=draw(st.sampled_from([0.0, 0.0, 1.0]) | st.floats(0.0, 1.0)),   # share of -inf entries
                mask_pad_column=draw(st.booleans()),                                   # a model that masks the pad logit
                normalised=draw(st.booleans()),                                        # log-probabilities, not raw logits
                scale=draw(st.sampled_from([0.01, 1.0, 10.0, 100.0])),
                dtype=draw(st.sampled_from([torch.float64, torch.float32])),
                seed=draw(st.integers(0, 2**31 - 1)))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(loss_case())
def test_label_smoothed_loss_fast_equals_explicit_for_any_log_probabilities(c):
    V, n, pad, eps = c["V"], c["n"], c["pad"], c["eps"]
    g = torch.Generator().manual_seed(c["seed"])
    z = torch.randn(n, V, generator=g, dtype=torch.float64) * c["scale"]
    z[torch.rand(n, V, generator=g) < c["p_inf"]] = -math.inf
    if c["mask_pad_column"]: z[:, pad] = -math.inf
    if c["normalised"]:                                                   # rows with a finite entry become log p
        lse = z.logsumexp(-1, keepdim=True)
        z = torch.where(lse.isfinite(), z - lse, z)
    z = z.to(c["dtype"])
    target = torch.randint(0, V, (n,), generator=g)
    fast, slow = LabelSmoothingLoss(V, eps, pad), LabelSmoothingLoss(V, eps, pad, fast=False)
    for i in range(n):                                                    # row by row: the inf/finite pattern per position
        f, s = fast(z[i:i + 1], target[i:i + 1]), slow(z[i:i + 1], target[i:i + 1])
        y = int(target[i])
        # the true KL(q || p) is +inf iff q > 0 on a -inf score: the label's, or (ε > 0) another non-pad token's
        others = [j for j in range(V) if j not in (y, pad)]
        u_positive = torch.tensor(eps / (V - 2), dtype=f.dtype) > 0        # q off the label as stored in the loss dtype
        infinite = y != pad and (z[i, y] == -math.inf or (u_positive and bool((z[i, others] == -math.inf).any())))
        ctx = f"row {i}: label {y}, pad {pad}, ε={eps}, scores {z[i].tolist()}: fast {f.item()}, explicit {s.item()}"
        assert not f.isnan() and not s.isnan(), ctx
        assert f.dtype == s.dtype == (torch.float64 if c["dtype"] == torch.float64 else torch.float32), ctx
        if infinite: assert f.item() == s.item() == math.inf, ctx
        else:
            assert f.isfinite() and s.isfinite(), ctx
            # tolerance: relative to the size of the cross-entropy, 1e-9 in float64 and 1e-5 in float32
            tol = (1e-9 if c["dtype"] == torch.float64 else 1e-5) * (1 + f.item() + fast.entropy)
            assert abs(f.item() - s.item()) <= tol, f"{ctx}, |difference| {abs(f.item() - s.item()):.3g} > {tol:.3g}"
            assert s.item() >= -tol, ctx                                   # a KL divergence is never negative
    total_f, total_s = fast(z, target), slow(z, target)                   # and the sums over the batch
    assert not total_f.isnan() and total_f.isinf() == total_s.isinf()


# ---- inputs without a heads axis, (batch, len, d): the fused path takes every mask check_mask takes ----------------

@st.composite
def headless_mask_case(draw):
    "Scores (batch, q_len, k_len) and a mask shape of rank 0-4 whose every dim is 1, the full size or a wrong size."
    full = (draw(st.integers(1, 3)), draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    rank = draw(st.integers(0, 4))
    shape = []
    for i in range(rank):
        size = full[i - rank] if rank - i <= 3 else 2        # a fourth, leading dim has no counterpart in the scores
        kind = draw(st.sampled_from(["one", "full", "wrong"]))
        shape.append(1 if kind == "one" else size if kind == "full" else size + draw(st.integers(1, 2)))
    return full, tuple(shape), draw(st.floats(0.0, 1.0)), draw(st.integers(0, 2**31 - 1))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(headless_mask_case())
def test_headless_inputs_fused_equals_explicit_for_every_mask_check_mask_accepts(case):
    (b, q_len, k_len), shape, p_keep, seed = case
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(b, n, 4, generator=g) for n in (q_len, k_len, k_len))
    mask = torch.rand(shape, generator=g) < p_keep
    # rank ≤ 3 (a 4-D mask would broadcast its batch against the inputs') and each dim 1 or the full size
    rule = len(shape) <= 3 and all(m in (1, s) for m, s in zip(shape[::-1], (b, q_len, k_len)[::-1]))
    _, check_err = _attempt(lambda: check_mask(mask, (b, q_len, k_len)))
    explicit, explicit_err = _attempt(lambda: scaled_dot_product_attention(q, k, v, mask)[0])
    fused, fused_err = _attempt(lambda: fused_attention(q, k, v, mask))
    assert (check_err is None) == rule, f"check_mask {'accepted' if check_err is None else 'refused'} {shape} for scores {(b, q_len, k_len)}"
    for name, err in {"explicit": explicit_err, "fused": fused_err}.items():
        assert (err is None) == rule, f"{name} path {'refused' if err else 'accepted'} mask {shape} (check_mask: {check_err}): {err!r}"
        if err is not None: assert isinstance(err, ValueError) and "does not broadcast" in str(err), f"{name}: {err!r}"
    if rule:
        assert explicit.shape == fused.shape == (b, q_len, 4)
        torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)   # two kernels: equal to float32 rounding
