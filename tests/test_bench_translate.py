"Translation benchmark (appendix: benchmarking) and chapter 23's fast search: the result's structure on a tiny model; no timed assertions."
import copy, json

import pytest
import torch

ctranslate2 = pytest.importorskip(
    "ctranslate2", reason="ctranslate2 is not installed: the benchmark compares against it (pip install 'annotated-transformer[ctranslate2]')")

from annotated_transformer.benchmarking import DECODING_LEVERS, TranslationBench, bench_table, bench_translation
from annotated_transformer.engines import quantize_int8
from annotated_transformer.data import SAMPLE_DIR, BPECodec, load_split
from annotated_transformer.decoding import SearchOptions, beam_search
from annotated_transformer.evaluation import decode_corpus
from annotated_transformer.fast_decoding import fast_beam_search
from annotated_transformer.fast_model import make_fast
from annotated_transformer.data import sentence_ids
from annotated_transformer.embeddings import BOS_IDX, EOS_IDX, PAD_IDX
from annotated_transformer.evaluation import encode_sources
from annotated_transformer.model import create_transformer

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def setup():
    pairs = load_split("val", SAMPLE_DIR, 8, download=False)
    codec = BPECodec.build(load_split("train", SAMPLE_DIR, 200, download=False), vocab_size=300)
    torch.manual_seed(0)
    m = create_transformer(codec.src_vocab_size, codec.tgt_vocab_size, "tiny", share_embeddings=True, max_len=64).eval()
    with torch.no_grad():
        m.generator.proj.bias[EOS_IDX] += 1.5                    # assorted lengths
        m.generator.proj.bias[[PAD_IDX, BOS_IDX]] = -30.0
    return m, codec, pairs


def test_bench_structure(setup):
    m, codec, pairs = setup
    how = TranslationBench(threads=(1, 2), repeats=1, latency_sentences=2, lever_sentences=4, batch_size=4)
    res = bench_translation(m, how, codec=codec, pairs=pairs)
    assert json.loads(json.dumps(res)) == res                                     # plain data
    for key in ("command", "date", "hardware", "cpu_capability", "torch", "ctranslate2", "torch_threads", "cpu_count", "runs", "latency", "levers"):
        assert key in res, key
    assert res["command"].startswith("bench_translation(") and res["sentences"] == len(pairs)
    assert res["hardware"]["vendor"] and res["hardware"]["capability"] == res["cpu_capability"] and res["date"].endswith("UTC")
    names = {r["name"] for r in res["runs"]}
    assert {"ours fp32, 1 thr", "ours int8, 1 thr", "CT2 float32, 1 thr", "CT2 int8, 1 thr", "ours fp32, 2 thr",
            "ours fp32, 2 workers", "CT2 float32, 2 workers", "CT2 int8, 2 workers"} <= names
    for r in res["runs"]:
        assert r["sentences_per_s"] > 0 and 0 <= r["bleu"] <= 100 and len(r["seconds"]) == 1
        assert r.get("command_line") or r["tokens_per_s"] >= 0      # text rows count sentences only
        assert r["cores"] == r["threads"] * r["workers"] and r["vs_ct2_float32_best"] is not None
    assert [r["vs_ct2_float32"] for r in res["runs"] if r["name"].startswith("CT2 float32")] == [1.0, 1.0, 1.0]
    assert all(0 <= r["identical"] <= len(pairs) for r in res["runs"])
    assert res["runs"][0]["name"] == "ours fp32, 1 thr" and res["runs"][0]["identical"] == len(pairs)
    for layout in ("1 thr", "2 workers"):              # the command line's own rows, text in and out
        r = next(r for r in res["runs"] if r["name"] == f"translate --engine ctranslate2, {layout}")
        assert r["command_line"] and r["vs_ct2_float32"] is not None and r["tokens_per_s"] is None
    assert [r["engine"][:4] for r in res["latency"]][:2] == ["ours", "ours"]
    assert {"ours fp32", "ours int8", "CT2 float32", "CT2 int8"} <= {r["engine"] for r in res["latency"]}
    assert all(r["p50_ms"] <= r["p90_ms"] for r in res["latency"])
    assert [r["lever"] for r in res["levers"]] == list(DECODING_LEVERS)
    assert all(r["identical"] == r["sentences"] == 4 for r in res["levers"] if r["exact"])   # exact levers: the same ids
    table = bench_table(res)
    assert "| ours fp32, 1 thr |" in table and "lever" in table and res["command"] in table
    assert "× CTranslate2's own row on ids; opening it apart: the first export" in table


def test_fast_search_workers_and_int8(setup):
    m, codec, pairs = setup
    ids, _ = encode_sources(codec, [s for s, _ in pairs], 64)
    ref = decode_corpus(m, ids, search=beam_search)                              # the paper's model and search
    fast = make_fast(copy.deepcopy(m))                                           # the caller chooses the fast twins
    assert decode_corpus(fast, ids, search=fast_beam_search) == ref              # fast_beam_search: the same ids
    assert decode_corpus(fast, ids, search=fast_beam_search, workers=2, batch_size=2) == ref   # a worker per core, in order
    assert decode_corpus(fast, ids, search=fast_beam_search, sort=False) == ref
    q = quantize_int8(m)
    assert isinstance(m.generator.proj, torch.nn.Linear)                          # the original is left as it was
    assert len(decode_corpus(make_fast(q), ids, search=fast_beam_search)) == len(ids)


def test_sentence_ids():
    assert sentence_ids([BOS_IDX, 5, 6, EOS_IDX, PAD_IDX, PAD_IDX]) == [5, 6]
    assert sentence_ids([5, PAD_IDX, 6]) == [5, 6]


def test_lever_sentences_zero_means_no_lever_table():
    "bench --translate --lever-sentences 0: accepted (its help says 0 means no lever table); a negative count is not."
    from annotated_transformer.cli import build_parser
    p = build_parser()
    assert p.parse_args(["bench", "--translate", "--lever-sentences", "0"]).lever_sentences == 0
    assert p.parse_args(["bench", "--translate", "--lever-sentences", "3"]).lever_sentences == 3
    with pytest.raises(SystemExit): p.parse_args(["bench", "--translate", "--lever-sentences", "-1"])
    with pytest.raises(SystemExit): p.parse_args(["bench", "--translate", "--n-sentences", "0"])   # the others stay ≥ 1


def test_bench_with_onnx_runtime(setup):
    "`onnx=True` (what `bench --translate` passes with the [onnx] extra): a third engine, same search."
    pytest.importorskip("onnxruntime", reason="the [onnx] extra is not installed")
    m, codec, pairs = setup
    how = TranslationBench(threads=(1,), repeats=1, latency_sentences=0, int8_ours=False, batch_size=4, onnx=True)
    res = bench_translation(m, how, codec=codec, pairs=pairs)
    rows = {r["name"]: r for r in res["runs"]}
    assert rows["ONNX Runtime fp32, 1 thr"]["engine"] == "onnxruntime"
    assert rows["ONNX Runtime fp32, 1 thr"]["vs_ct2_float32"] is not None
    # two computations of one search: BLEU within 0.3 (ids agree but for near-ties)
    assert abs(rows["ONNX Runtime fp32, 1 thr"]["bleu"] - rows["ours fp32, 1 thr"]["bleu"]) <= 0.3
