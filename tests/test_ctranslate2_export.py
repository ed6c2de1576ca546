"Export to CTranslate2 (appendix: ctranslate2): a tiny model's round trip — CTranslate2's greedy output equals ours token for token."
import argparse, copy, json
from pathlib import Path

import pytest
import torch

ctranslate2 = pytest.importorskip(
    "ctranslate2", reason="ctranslate2 is not installed: the export is an optional extra (pip install 'annotated-transformer[ctranslate2]')")

from annotated_transformer.ctranslate2_export import (CT2_META, codec_tokens, decode_ctranslate2, export_ctranslate2,
                                                      load_ctranslate2, translate_ctranslate2)
from annotated_transformer.cli_tools import export_command
from annotated_transformer.data import SAMPLE_DIR, BPECodec, encode_pairs, load_split
from annotated_transformer.decoding import SearchOptions
from annotated_transformer.fast_decoding import fast_beam_search
from annotated_transformer.fast_model import make_fast
from annotated_transformer.embeddings import BOS_IDX, EOS_IDX, PAD_IDX
from annotated_transformer.evaluation import decode_corpus, encode_sources
from annotated_transformer.model import create_transformer
from annotated_transformer.checkpoints import save_checkpoint

torch.set_num_threads(1)  # tiny models: one thread is fastest on a busy machine


def ours(model, ids, options):
    "Our decoding as the command line runs it: the fast twins, the fast search."
    return decode_corpus(make_fast(copy.deepcopy(model)), ids, options, fast_beam_search)


@pytest.fixture(scope="module")
def codec():
    return BPECodec.build(load_split("train", SAMPLE_DIR, 200, download=False), vocab_size=300)


def tiny_model(codec, seed=0, **config):
    "A random tiny model that, like a trained one, stops at assorted lengths and never emits <pad> or <s>."
    torch.manual_seed(seed)
    m = create_transformer(codec.src_vocab_size, codec.tgt_vocab_size, "tiny", share_embeddings=True, max_len=64, **config).eval()
    with torch.no_grad():
        m.generator.proj.bias[EOS_IDX] += 1.6 if config.get("norm_first") else 1.5   # mid-range of the biases that give assorted lengths
        m.generator.proj.bias[[PAD_IDX, BOS_IDX]] = -30.0
    return m


@pytest.fixture(scope="module")
def sources(codec):
    pairs = load_split("val", SAMPLE_DIR, 30, download=False)
    return pairs, encode_sources(codec, [s for s, _ in pairs], 64)[0]


@pytest.mark.parametrize("config", [{}, {"norm_first": True}], ids=["post-norm", "pre-norm"])
def test_greedy_round_trip(codec, sources, tmp_path, config):
    "The acceptance test: exported, then decoded greedily by CTranslate2 in float32 — identical to ours, token for token."
    model = tiny_model(codec, **config)
    tr, c2, _ = load_ctranslate2(export_ctranslate2(model, tmp_path / "ct2", codec=codec), compute_type="float32")
    pairs, ids = sources
    mine, theirs = ours(model, ids, SearchOptions(beam_size=1)), decode_ctranslate2(tr, c2, ids, SearchOptions(beam_size=1), max_len=64)
    assert theirs == mine
    lengths = sorted(map(len, mine))
    assert lengths[0] < lengths[-1], lengths                          # assorted lengths: the caps and </s> are both exercised


def test_teacher_forced_log_probs_agree(codec, sources, tmp_path):
    "Both engines give a reference translation the same log-probabilities (float32 rounding)."
    model = tiny_model(codec)
    tr, _, _ = load_ctranslate2(export_ctranslate2(model, tmp_path / "ct2", codec=codec), compute_type="float32")
    tokens = codec_tokens(codec)[0]
    for s, t in encode_pairs(codec, sources[0][:5]):
        theirs = tr.score_batch([[tokens[i] for i in s[1:-1]]], [[tokens[i] for i in t[1:-1]]])[0].log_probs
        with torch.no_grad():
            tin = t[None, :-1]
            logp = model.generator(model(s[None], tin, model.make_src_mask(s[None]), model.make_tgt_mask(tin)))[0]
        assert torch.allclose(torch.tensor(theirs), logp.gather(-1, t[1:, None])[:, 0], atol=1e-4)


def test_from_checkpoint_and_text_path(codec, sources, tmp_path):
    "A training checkpoint exports with its own codec; `translate_ctranslate2` goes text → our BPE → CTranslate2 → text."
    model = tiny_model(codec, seed=1)
    ck = save_checkpoint(tmp_path / "step.pt", model, extra={"vocab": codec.to_dict(), "src": "de", "tgt": "en"})
    out = export_ctranslate2(ck, tmp_path / "ct2")
    meta = json.loads((out / CT2_META).read_text())
    assert (meta["src_lang"], meta["tgt_lang"], meta["quantization"]) == ("de", "en", "float32")
    pairs, ids = sources
    want = [codec.tgt_text(h) for h in ours(model, ids[:8], SearchOptions(beam_size=1))]
    assert translate_ctranslate2(out, [s for s, _ in pairs[:8]], SearchOptions(beam_size=1), compute_type="float32") == want
    assert translate_ctranslate2(out, ["", "   "], SearchOptions(beam_size=1)) == ["", ""]


def test_export_command(codec, tmp_path):
    "The `export` subcommand's handler: int8 CTranslate2 from a checkpoint; clear errors for impossible requests."
    ck = save_checkpoint(tmp_path / "step.pt", tiny_model(codec), extra={"vocab": codec.to_dict()})
    ns = lambda **kw: argparse.Namespace(**{"checkpoint": None, "model": None, "quantization": None, "format": "ctranslate2", **kw})
    assert export_command(ns(checkpoint=str(ck), output=str(tmp_path / "int8"), quantization="int8")) == 0
    assert json.loads((tmp_path / "int8" / CT2_META).read_text())["quantization"] == "int8"
    assert export_command(ns(checkpoint=str(ck), format="safetensors", output=str(tmp_path / "st"))) == 0
    assert (tmp_path / "st" / "model.safetensors").is_file()
    with pytest.raises(ValueError, match="applies to --format ctranslate2 only"):
        export_command(ns(checkpoint=str(ck), format="safetensors", quantization="int8", output=str(tmp_path / "x")))
    (tmp_path / "mine").mkdir(); (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(FileExistsError, match="not a CTranslate2 export"):
        export_command(ns(checkpoint=str(ck), output=str(tmp_path / "mine")))
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


@pytest.mark.parametrize("quantization", ["int8", "int8_float32"])
def test_a_quantized_export_leaves_the_model_as_it_was(codec, tmp_path, quantization):
    "The spec is quantized in place: it must hold copies of the weights, never the model's own tensors."
    model = tiny_model(codec)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    export_ctranslate2(model, tmp_path / "ct2", quantization, codec=codec)
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert not changed, changed
