"The JoeyNMT converter's pure mapping (tools/joeynmt_compare.py): runs without JoeyNMT, its venv or the network."
import importlib.util
from pathlib import Path

import torch

from annotated_transformer.embeddings import BOS_IDX, EOS_IDX, PAD_IDX, UNK_IDX
from annotated_transformer.fast_model import make_fast
from annotated_transformer.model import create_transformer

TOOL = Path(__file__).resolve().parents[1] / "tools" / "joeynmt_compare.py"
spec = importlib.util.spec_from_file_location("joeynmt_compare", TOOL)
jc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(jc)                       # the tool imports only the standard library at the top


def tiny(V=40):
    torch.manual_seed(0)
    return make_fast(create_transformer(V, V, "tiny", share_embeddings=True, norm_first=False, max_len=64)).eval()


def test_vocabulary_order_puts_our_specials_where_joeynmt_expects_them():
    order, tokens = jc.joey_order(40), jc.joey_tokens(40)
    assert sorted(order) == list(range(40))                                   # one to one
    assert order[:4] == [UNK_IDX, PAD_IDX, BOS_IDX, EOS_IDX]                 # JoeyNMT: <unk>, <pad>, <s>, </s>
    assert tokens[:4] == ["<unk>", "<pad>", "<s>", "</s>"] and len(set(tokens)) == 40
    assert all(tokens[j] == str(order[j]) for j in range(4, 40))


def test_ids_travel_both_ways():
    src = [BOS_IDX, 7, UNK_IDX, 12, EOS_IDX]
    line = jc.joey_line(src, 40)
    assert line == "<s> 7 <unk> 12"                                            # JoeyNMT appends </s> itself
    assert jc.from_joey(["7", "<unk>", "12", "</s>", "5"], jc.joey_order(40)) == [7, UNK_IDX, 12]


def test_state_dict_maps_every_weight():
    m = tiny()
    sd, bias = jc.joey_state_dict(m, joey_pe_len=100)
    c, perm = m.config, torch.tensor(jc.joey_order(40))
    n_enc = 4 * 2 + 2 + 3 * 2                  # q, k, v, output (weight, bias); its norm; FFN's two linears and norm
    n_dec = 2 * 4 * 2 + 2 * 2 + 3 * 2          # two attentions; two norms; the FFN
    assert len(sd) == 3 + 2 + c.n_layers * (n_enc + n_dec)                  # embeddings ×3, tables ×2, layers
    emb = m.src_embed.embed.lut.weight
    for k in ("src_embed.lut.weight", "trg_embed.lut.weight", "decoder.output_layer.weight"):
        torch.testing.assert_close(sd[k], emb[perm].detach())
    torch.testing.assert_close(bias, m.generator.proj.bias[perm].detach())
    assert sd["encoder.pe.pe"].shape == (1, 100, c.d_model)
    torch.testing.assert_close(sd["encoder.pe.pe"][0, :64], m.src_embed.pos.pe)
    torch.testing.assert_close(sd["encoder.pe.pe"], jc.sinusoid_table(100, c.d_model), atol=1e-5, rtol=0)
    W, d = m.decoder.layers[1].src_attn.in_proj.weight, c.d_model
    for k, name in enumerate("qkv"):
        torch.testing.assert_close(sd[f"decoder.layers.1.src_trg_att.{name}_layer.weight"], W[k * d:(k + 1) * d].detach())
    torch.testing.assert_close(sd["decoder.layers.0.dec_layer_norm.weight"], m.decoder.layers[0].sublayer[1].norm.weight.detach())
    torch.testing.assert_close(sd["encoder.layers.0.feed_forward.pwff_layer.3.bias"], m.encoder.layers[0].feed_forward.w_2.bias.detach())
