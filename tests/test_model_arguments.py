"""Wrong arguments to the model's public calls fail at the door, naming the call and the argument.

Every public entry of the paper's model — `Transformer.forward`, `encode`, `decode`, and the `forward` of the stacks,
the layers, the sublayer connection, multi-head attention, the feed-forward network, the embeddings, the positional
encoding and the generator — is given swapped, transposed and wrongly typed arguments. Each must raise `TypeError`
(the wrong kind of tensor, or no tensor) or `ValueError` (the wrong shape) whose message begins
"CALL: ARGUMENT ", instead of dying deep inside (a matrix product, an index kernel, tuple unpacking).
Correct calls, with every mask shape the book passes, still run."""
import copy

import pytest
import torch

from annotated_transformer.attention import causal_mask
from annotated_transformer.model import create_transformer


@pytest.fixture(scope="module")
def parts():
    torch.manual_seed(0)
    model = create_transformer(11, 13, "tiny").eval()                  # d_model 64, 4 heads, 2 layers
    src = torch.tensor([[1, 5, 6, 7, 2, 0], [1, 8, 9, 2, 0, 0]])      # (2, 6)
    tgt = torch.tensor([[1, 4, 5, 6], [1, 7, 8, 0]])                  # (2, 4)
    sm, tm = model.make_src_mask(src), model.make_tgt_mask(tgt)       # (2, 1, 1, 6), (2, 1, 4, 4)
    with torch.no_grad():
        mem = model.encode(src, sm)                                   # (2, 6, 64)
        y = model.tgt_embed(tgt)                                      # (2, 4, 64)
    enc_layer, dec_layer = model.encoder.layers[0], model.decoder.layers[0]
    return dict(model=model, src=src, tgt=tgt, sm=sm, tm=tm, mem=mem, y=y,
                encoder=model.encoder, decoder=model.decoder, enc_layer=enc_layer, dec_layer=dec_layer,
                sublayer=enc_layer.sublayer[0], mha=dec_layer.src_attn, ff=enc_layer.feed_forward,
                embed=model.src_embed.embed, pos=model.src_embed.pos, token_embed=model.tgt_embed,
                generator=model.generator)


# (entry, what is wrong, the call, exception, argument named, the bad call on the parts `p`)
CASES = [
    # Transformer.forward (EncoderDecoder.forward): model(src, tgt, src_mask, tgt_mask)
    ("forward", "masks in the ids' places", "forward", TypeError, "tgt", lambda p: p["model"](p["src"], p["sm"], p["tgt"], p["tm"])),
    ("forward", "float ids", "forward", TypeError, "src", lambda p: p["model"](p["src"].float(), p["tgt"], p["sm"], p["tm"])),
    ("forward", "transposed target", "forward", ValueError, "tgt_mask", lambda p: p["model"](p["src"], p["tgt"].T, p["sm"], p["tm"])),
    ("forward", "float mask", "forward", TypeError, "src_mask", lambda p: p["model"](p["src"], p["tgt"], p["sm"].float(), p["tm"])),
    ("forward", "embeddings for ids", "forward", TypeError, "src", lambda p: p["model"](p["mem"], p["tgt"], p["sm"], p["tm"])),
    # encode(src, src_mask)
    ("encode", "swapped src and src_mask", "encode", TypeError, "src", lambda p: p["model"].encode(p["sm"], p["src"])),
    ("encode", "transposed src", "encode", ValueError, "src_mask", lambda p: p["model"].encode(p["src"].T, p["sm"])),
    ("encode", "float ids", "encode", TypeError, "src", lambda p: p["model"].encode(p["src"].float(), p["sm"])),
    ("encode", "1-D ids", "encode", ValueError, "src", lambda p: p["model"].encode(p["src"][0], p["sm"])),
    ("encode", "integer mask", "encode", TypeError, "src_mask", lambda p: p["model"].encode(p["src"], p["sm"].long())),
    ("encode", "a mask for 3 heads of 4", "encode", ValueError, "src_mask",
     lambda p: p["model"].encode(p["src"], p["sm"].expand(2, 3, 6, 6))),
    # decode(memory, src_mask, tgt, tgt_mask)
    ("decode", "swapped tgt and memory", "decode", TypeError, "tgt", lambda p: p["model"].decode(p["tgt"], p["sm"], p["mem"], p["tm"])),
    ("decode", "transposed memory", "decode", ValueError, "memory",
     lambda p: p["model"].decode(p["mem"].transpose(1, 2), p["sm"], p["tgt"], p["tm"])),
    ("decode", "ids for memory", "decode", TypeError, "memory", lambda p: p["model"].decode(p["src"], p["sm"], p["tgt"], p["tm"])),
    ("decode", "memory of another batch", "decode", ValueError, "memory",
     lambda p: p["model"].decode(p["mem"][:1], p["sm"], p["tgt"], p["tm"])),
    ("decode", "swapped masks", "decode", ValueError, "tgt_mask", lambda p: p["model"].decode(p["mem"], p["tm"], p["tgt"], p["sm"])),
    ("decode", "float target mask", "decode", TypeError, "tgt_mask",
     lambda p: p["model"].decode(p["mem"], p["sm"], p["tgt"], p["tm"].float())),
    # Encoder.forward(x, mask) and EncoderLayer.forward(x, mask)
    *[(name, what, call, exc, arg, (lambda f, n: lambda p: f(p, p[n]))(f, name)) for name, call in
      (("encoder", "Encoder"), ("enc_layer", "EncoderLayer")) for what, exc, arg, f in [
          ("swapped x and mask", TypeError, "x", lambda p, m: m(p["sm"], p["mem"])),
          ("transposed x", ValueError, "x", lambda p, m: m(p["mem"].transpose(1, 2), p["sm"])),
          ("ids for x", TypeError, "x", lambda p, m: m(p["src"], p["sm"])),
          ("float mask", TypeError, "mask", lambda p, m: m(p["mem"], p["sm"].float())),
          ("mask of another length", ValueError, "mask", lambda p, m: m(p["mem"], p["sm"][..., :4])),
      ]],
    # Decoder.forward and DecoderLayer.forward(x, memory, src_mask, tgt_mask)
    *[(name, what, call, exc, arg, (lambda f, n: lambda p: f(p, p[n]))(f, name)) for name, call in
      (("decoder", "Decoder"), ("dec_layer", "DecoderLayer")) for what, exc, arg, f in [
          ("swapped x and memory", ValueError, "src_mask", lambda p, m: m(p["mem"], p["y"], p["sm"], p["tm"])),
          ("transposed memory", ValueError, "memory", lambda p, m: m(p["y"], p["mem"].transpose(1, 2), p["sm"], p["tm"])),
          ("ids for x", TypeError, "x", lambda p, m: m(p["tgt"], p["mem"], p["sm"], p["tm"])),
          ("a mask for memory", TypeError, "memory", lambda p, m: m(p["y"], p["sm"], p["mem"], p["tm"])),
          ("integer target mask", TypeError, "tgt_mask", lambda p, m: m(p["y"], p["mem"], p["sm"], p["tm"].int())),
      ]],
    # SublayerConnection.forward(x, sublayer)
    ("sublayer", "swapped x and sublayer", "SublayerConnection", TypeError, "x", lambda p: p["sublayer"](lambda t: t, p["mem"])),
    ("sublayer", "transposed x", "SublayerConnection", ValueError, "x", lambda p: p["sublayer"](p["mem"].transpose(1, 2), lambda t: t)),
    ("sublayer", "ids for x", "SublayerConnection", TypeError, "x", lambda p: p["sublayer"](p["src"], lambda t: t)),
    # MultiHeadAttention.forward(query, key, value, mask)
    ("mha", "swapped value and mask", "MultiHeadAttention", TypeError, "value", lambda p: p["mha"](p["y"], p["mem"], p["sm"], p["mem"])),
    ("mha", "transposed key", "MultiHeadAttention", ValueError, "key",
     lambda p: p["mha"](p["y"], p["mem"].transpose(1, 2), p["mem"], p["sm"])),
    ("mha", "keys and values of different lengths", "MultiHeadAttention", ValueError, "value",
     lambda p: p["mha"](p["y"], p["mem"], p["mem"][:, :5], p["sm"])),
    ("mha", "ids for query", "MultiHeadAttention", TypeError, "query", lambda p: p["mha"](p["tgt"], p["mem"], p["mem"], p["sm"])),
    ("mha", "float mask", "MultiHeadAttention", TypeError, "mask", lambda p: p["mha"](p["y"], p["mem"], p["mem"], p["sm"].float())),
    ("mha", "transposed mask", "MultiHeadAttention", ValueError, "mask",
     lambda p: p["mha"](p["y"], p["mem"], p["mem"], p["sm"].transpose(-2, -1))),
    # PositionwiseFeedForward.forward(x)
    ("ff", "transposed x", "PositionwiseFeedForward", ValueError, "x", lambda p: p["ff"](p["mem"].transpose(1, 2))),
    ("ff", "ids for x", "PositionwiseFeedForward", TypeError, "x", lambda p: p["ff"](p["src"])),
    ("ff", "a mask for x", "PositionwiseFeedForward", TypeError, "x", lambda p: p["ff"](p["sm"])),
    # Embeddings.forward(x) and TokenEmbedding.forward(tokens)
    ("embed", "embeddings for ids", "Embeddings", TypeError, "x", lambda p: p["embed"](p["mem"])),
    ("embed", "a mask for ids", "Embeddings", TypeError, "x", lambda p: p["embed"](p["sm"])),
    ("embed", "ids with an extra axis", "Embeddings", ValueError, "x", lambda p: p["embed"](p["src"][..., None])),
    ("token_embed", "embeddings for ids", "TokenEmbedding", TypeError, "tokens", lambda p: p["token_embed"](p["y"])),
    ("token_embed", "1-D ids", "TokenEmbedding", ValueError, "tokens", lambda p: p["token_embed"](p["tgt"][0])),
    # PositionalEncoding.forward(x, start_pos)
    ("pos", "ids for embeddings", "PositionalEncoding", TypeError, "x", lambda p: p["pos"](p["src"])),
    ("pos", "transposed x", "PositionalEncoding", ValueError, "x", lambda p: p["pos"](p["mem"].transpose(1, 2))),
    ("pos", "one position without its batch", "PositionalEncoding", ValueError, "x", lambda p: p["pos"](p["mem"][0])),
    # Generator.forward(x) and Generator.logits(x)
    ("generator", "transposed x", "Generator", ValueError, "x", lambda p: p["generator"](p["mem"].transpose(1, 2))),
    ("generator", "ids for x", "Generator", TypeError, "x", lambda p: p["generator"](p["tgt"])),
    ("generator", "ids for x (logits)", "Generator", TypeError, "x", lambda p: p["generator"].logits(p["tgt"])),
]


@pytest.mark.parametrize("entry,what,call,exc,arg,bad", CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_a_wrong_argument_is_refused_by_name(parts, entry, what, call, exc, arg, bad):
    with pytest.raises(Exception) as info: bad(parts)
    e = info.value
    assert type(e) is exc, f"{entry} given {what}: {exc.__name__} expected, got {type(e).__name__}: {e}"
    assert str(e).startswith(f"{call}: {arg} "), f"{entry} given {what}: the error should begin '{call}: {arg} ', got: {e}"


def test_the_swap_is_hinted(parts):
    "The issue's example: `decode` given the target and the memory in each other's place."
    p = parts
    with pytest.raises(TypeError, match="did you swap tgt and memory"): p["model"].decode(p["tgt"], p["sm"], p["mem"], p["tm"])


def test_every_mask_the_book_passes_is_accepted(parts):
    "Padding (batch, 1, 1, src_len), target (batch, 1, T, T), causal (1, 1, T, T), None; and lower ranks."
    p, T = parts, parts["tgt"].shape[1]
    model, src, tgt, sm, tm, mem = (p[k] for k in ("model", "src", "tgt", "sm", "tm", "mem"))
    with torch.no_grad():
        for tgt_mask in (tm, causal_mask(T), causal_mask(T)[0, 0], None):
            assert model(src, tgt, sm, tgt_mask).shape == (2, T, 64)
        for src_mask in (sm, sm[0, 0], sm[0, 0, 0], None):     # (batch, 1, 1, src_len), (1, src_len), (src_len,)
            assert model.encode(src, src_mask).shape == (2, 6, 64)
            assert model.decode(mem, src_mask, tgt, tm).shape == (2, T, 64)
        assert p["generator"](model.decode(mem, sm, tgt, tm)[:, -1]).shape == (2, 13)   # a decoding step's last row
        assert p["ff"](mem[0]).shape == (6, 64)                                         # (n_real, d_model), as the fast model


def test_reduced_precision_activations_pass(parts):
    "Activations may be any floating dtype: the model runs in bfloat16 and float16 too."
    layer = copy.deepcopy(parts["enc_layer"]).to(torch.bfloat16)
    assert layer(parts["mem"].to(torch.bfloat16), parts["sm"]).dtype == torch.bfloat16


def test_a_mask_of_the_other_convention_is_refused_by_name(parts):
    "(batch, 1, src_len), as harvardnlp's code builds it, pairs sentences with heads here: refused, named."
    p = parts
    with pytest.raises(ValueError, match=r"^encode: src_mask of shape \(2, 1, 6\) does not broadcast"):
        p["model"].encode(p["src"], p["sm"][:, 0])


def test_the_checks_read_no_tensor_data():
    """Shapes and dtypes only: every layer's checks pass on the meta device, where tensors hold no data to read
    (an `.item()` or a `bool(tensor)` there would raise), and a wrong argument is still refused by name.
    `Transformer.encode` and `decode` read the ids' values on purpose (`check_tokens`): the stack is entered below them."""
    from annotated_transformer.encoder_decoder import EncoderDecoder
    with torch.device("meta"):
        model = create_transformer(40, 40, "tiny").eval()
        src, tgt = torch.empty(2, 7, dtype=torch.long), torch.empty(2, 5, dtype=torch.long)
        sm, tm = torch.empty(2, 1, 1, 7, dtype=torch.bool), torch.empty(2, 1, 5, 5, dtype=torch.bool)
    mem = EncoderDecoder.encode(model, src, sm)
    assert model.generator(EncoderDecoder.decode(model, mem, sm, tgt, tm)).shape == (2, 5, 40)
    with pytest.raises(TypeError, match="^decode: tgt must be"): EncoderDecoder.decode(model, tgt, sm, mem, tm)
