"""Search errors of our beam search against CTranslate2's, on the same weights (a shipped model).

For every validation sentence, both engines decode with beam 4 and our length penalty (CTranslate2 returns its
final beam, and the hypothesis with the best GNMT score is kept, as `decode_ctranslate2` does). Both choices are
then re-scored by *our* model, teacher-forced: log P(Y | X) / lp(Y). A sentence where CTranslate2's hypothesis
scores higher than ours is a search error of ours: a better translation, under our own model and penalty, that
our search did not return. Also reports BLEU, the brevity penalty and the length ratio, and the decoding time.

    python tools/search_errors.py --out nbs/results/search_errors.json --key "the default search, the de-en model of small"
    python tools/search_errors.py --early-stop --out early.json                   # stop at K finished

Needs the `ctranslate2` extra and the Multi30k validation set under the data root (`ANNOTATED_TRANSFORMER_DATA`).
One thread, as the speed benchmark's first row."""
import argparse, json, math, shlex, subprocess, sys, tempfile, time
import torch
from torch import nn

def rescore(model: nn.Module, sources: list[list[int]], hyps: list[list[int]],
            length_penalty: float, batch_size: int = 64) -> list[float]:
    """Teacher-forced normalised scores log P(Y | X) / lp(|Y|) of `hyps` (ids without BOS/EOS) under `model`.
    EOS is appended and scored: every hypothesis ends in EOS (at its length limit the search forces it, chapter 14's
    `force_end`; CTranslate2 is stopped one token before the limit, so its hypotheses end there the same way)."""
    from annotated_transformer.embeddings import PAD_IDX, BOS_IDX, EOS_IDX
    from annotated_transformer.decoding import length_normalization
    out = []
    for s in range(0, len(sources), batch_size):
        src = nn.utils.rnn.pad_sequence([torch.tensor(x) for x in sources[s:s + batch_size]], batch_first=True,
                                        padding_value=PAD_IDX)
        ys = [h + [EOS_IDX] for h in hyps[s:s + batch_size]]
        tgt = nn.utils.rnn.pad_sequence([torch.tensor([BOS_IDX] + y) for y in ys], batch_first=True,
                                        padding_value=PAD_IDX)
        gold = nn.utils.rnn.pad_sequence([torch.tensor(y) for y in ys], batch_first=True, padding_value=PAD_IDX)
        tgt_in = tgt[:, :-1]
        src_mask, tgt_mask = model.make_src_mask(src), model.make_tgt_mask(tgt_in)
        h = model.decode(model.encode(src, src_mask), src_mask, tgt_in, tgt_mask)
        logp = model.generator(h).float().gather(-1, gold[..., None]).squeeze(-1)   # (batch, len)
        logp = logp.masked_fill(gold == PAD_IDX, 0.0).double().sum(-1)
        out += [float(lp) / length_normalization(len(y), length_penalty) for lp, y in zip(logp, ys)]
    return out

def bleu_row(codec, hyps: list[list[int]], refs: list[str]) -> dict:
    import sacrebleu
    b = sacrebleu.corpus_bleu([codec.tgt_text(h) for h in hyps], [refs])
    return {"bleu": round(b.score, 2), "bp": round(b.bp, 3), "ratio": round(b.sys_len / b.ref_len, 3),
            "sys_len": b.sys_len, "ref_len": b.ref_len}

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="de-en"); ap.add_argument("--split", default="val")
    ap.add_argument("--beam-size", type=int, default=4); ap.add_argument("--length-penalty", type=float, default=0.6)
    ap.add_argument("--early-stop", action="store_true", help="our search's early stop (K finished hypotheses)")
    ap.add_argument("--sentences", type=int, default=None, help="the first N only")
    ap.add_argument("--out", default=None, help="a JSON file: the result is stored in it under --key")
    ap.add_argument("--key", default=None, help="the result's key in --out (other keys are kept); none: the whole file")
    a = ap.parse_args()
    from annotated_transformer.pretrained import load_model
    from annotated_transformer.data import load_split
    from annotated_transformer.evaluation import encode_sources
    from annotated_transformer.decoding import SearchOptions
    from annotated_transformer.evaluation import decode_corpus
    from annotated_transformer.fast_decoding import fast_beam_search
    from annotated_transformer.fast_model import make_fast
    from annotated_transformer.ctranslate2_export import export_ctranslate2, load_ctranslate2, decode_ctranslate2
    from annotated_transformer.benchmarking import machine_record
    torch.set_num_threads(1)
    model, codec, meta = load_model(a.model)
    model = make_fast(model).eval()                                  # as the command line decodes
    pairs = load_split(a.split, src=meta["src_lang"], tgt=meta["tgt_lang"])[:a.sentences]
    refs = [t for _, t in pairs]
    ids, _ = encode_sources(codec, [s for s, _ in pairs], model.config.max_len)
    kw = dict(options=SearchOptions(beam_size=a.beam_size, length_penalty=a.length_penalty, early_stop=a.early_stop),
              search=fast_beam_search)
    with torch.inference_mode():
        t0 = time.perf_counter(); ours = decode_corpus(model, ids, **kw); t_ours = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as d:
            export_ctranslate2(a.model, d)
            tr, _, m = load_ctranslate2(d, intra_threads=1)
            t0 = time.perf_counter()
            theirs = decode_ctranslate2(tr, codec, ids, kw["options"], max_len=m["max_len"])
            t_ct2 = time.perf_counter() - t0
        s_ours = rescore(model, ids, ours, a.length_penalty)
        s_ct2 = rescore(model, ids, theirs, a.length_penalty)
    differ = [i for i, (x, y) in enumerate(zip(ours, theirs)) if x != y]
    tol = 1e-4   # two re-scorings of the same ids are the same computation; 1e-4 nats only absorbs batch padding
    errors = [i for i in differ if s_ct2[i] > s_ours[i] + tol]
    res = {**machine_record("python " + " ".join(map(shlex.quote, sys.argv))),
           "commit": subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip(),
           "torch": torch.__version__, "model": a.model, "train_state": meta["train_state"],   # which model of that name
           "split": a.split, "sentences": len(ids), "beam_size": a.beam_size,
           "length_penalty": a.length_penalty, "early_stop": a.early_stop,
           "different_hypotheses": len(differ), "search_errors": len(errors),
           "ours_better": sum(s_ours[i] > s_ct2[i] + tol for i in differ),
           "mean_gap_of_errors": round(sum(s_ct2[i] - s_ours[i] for i in errors) / max(len(errors), 1), 5),
           "ours": {**bleu_row(codec, ours, refs), "seconds": round(t_ours, 2)},
           "ctranslate2": {**bleu_row(codec, theirs, refs), "seconds": round(t_ct2, 2)},
           "error_sentences": errors}
    print(json.dumps({k: v for k, v in res.items() if k != "error_sentences"}, indent=1))
    if a.out:
        from pathlib import Path
        from annotated_transformer.runtime import atomic_file
        whole = json.loads(Path(a.out).read_text()) if a.key and Path(a.out).exists() else {}
        with atomic_file(a.out) as f: json.dump({**whole, a.key: res} if a.key else res, f, indent=1)

if __name__ == "__main__":
    main()
