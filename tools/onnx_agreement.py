"""The ONNX export against PyTorch on a shipped model's validation set: identical greedy ids, and BLEU of both.

Exports each shipped model (`export_onnx`), decodes the 1,014 Multi30k validation sentences greedily with ONNX
Runtime (`graph_greedy` over `OnnxTranslator`, one sentence at a time, as the page does) and with our package
as the command line runs it (`decode_corpus` with `fast_beam_search` on the fast twins, beam 1, batches of 64), and
counts the sentences whose ids are identical; then beam 4 (α 0.6) by the same search on both engines (`OnnxModel`),
counted the same way. Where they differ,
the gap between PyTorch's two best log-probs at the step where the outputs part is recorded: a near-tie (< 1e-3)
is the allowed kind of difference between two different computations. Both outputs are scored with sacreBLEU.

    python tools/onnx_agreement.py --out nbs/results/onnx_agreement.json

Needs the `onnx` extra and the Multi30k validation set under the data root (`ANNOTATED_TRANSFORMER_DATA`)."""
import argparse, json, shlex, sys, tempfile, time
from pathlib import Path
import numpy as np
import torch

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--directions", nargs="+", default=["de-en", "en-de"])
    p.add_argument("--limit", type=int, default=None, help="only the first N validation sentences")
    p.add_argument("--out", default=None, help="write the JSON here")
    a = p.parse_args(argv)
    from annotated_transformer.pretrained import load_model
    from annotated_transformer.data import load_split
    from annotated_transformer.decoding import SearchOptions
    from annotated_transformer.evaluation import decode_corpus
    from annotated_transformer.fast_decoding import fast_beam_search
    from annotated_transformer.fast_model import make_fast
    from annotated_transformer.evaluation import encode_sources, corpus_bleu
    from annotated_transformer.onnx_export import (export_onnx, OnnxTranslator, OnnxModel, graph_greedy,
                                                   teacher_forced, parting_gap)
    from annotated_transformer.benchmarking import machine_record
    torch.set_num_threads(1)
    rows = []
    for direction in a.directions:
        s, t = direction.split("-")
        model, codec, meta = load_model(direction)
        model = make_fast(model)                                         # as the command line decodes
        pairs = load_split("val", None, a.limit, download=False, src=s, tgt=t)
        ids, _ = encode_sources(codec, [x for x, _ in pairs], model.config.max_len)
        t0 = time.perf_counter()
        ours = decode_corpus(model, ids, SearchOptions(beam_size=1), fast_beam_search)
        t_torch = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as d:
            ort_model = OnnxTranslator(export_onnx(direction, Path(d) / direction))
            t0 = time.perf_counter()
            theirs = [graph_greedy(ort_model.encoder, ort_model.step, np.array([x]),
                                   min(len(x) + 50, model.config.max_len)) for x in ids]
            t_onnx = time.perf_counter() - t0
            beam_ours = decode_corpus(model, ids, SearchOptions(beam_size=4), fast_beam_search)   # one search, both engines
            beam_onnx = decode_corpus(OnnxModel(ort_model, model.config), ids, SearchOptions(beam_size=4), fast_beam_search)
        theirs = [[i for i in h if i != 2] for h in theirs]          # without </s>, as ours
        gaps = []
        for x, o, h in zip(ids, ours, theirs):
            if o == h: continue
            gaps.append(parting_gap(o, h, teacher_forced(model, o + [2], x)))
        refs = [y for _, y in pairs]
        rows.append({"direction": direction, "train_state": meta["train_state"], "sentences": len(ids),
                     "identical": sum(o == h for o, h in zip(ours, theirs)),
                     "near_ties": sum(g is not None and g < 1e-3 for g in gaps), "gaps": gaps,
                     "beam4_identical": sum(o == h for o, h in zip(beam_ours, beam_onnx)),
                     "beam4_bleu_torch": corpus_bleu([codec.tgt_text(o) for o in beam_ours], refs).score,
                     "beam4_bleu_onnx": corpus_bleu([codec.tgt_text(h) for h in beam_onnx], refs).score,
                     "bleu_torch": corpus_bleu([codec.tgt_text(o) for o in ours], refs).score,
                     "bleu_onnx": corpus_bleu([codec.tgt_text(h) for h in theirs], refs).score,
                     "seconds_torch_batched": round(t_torch, 1), "seconds_onnx_one_by_one": round(t_onnx, 1)})
        print(json.dumps(rows[-1]), flush=True)
    record = machine_record("python " + shlex.join(["tools/onnx_agreement.py", *(argv or sys.argv[1:])]))
    env = record["hardware"]
    result = {**record,
              "environment": {"cpu": env["cpu"], "capability": env["capability"], "torch": env["torch"],
                              "onnxruntime": __import__("onnxruntime").__version__, "threads": 1},
              "directions": rows}
    if a.out: Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    return result

if __name__ == "__main__":
    main()
