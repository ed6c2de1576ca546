"""The fast model's single-query attention lever, and fast decoding's top-k by chunks, shared cross-attention rows and deferred
cache reorder, each on against off, over the 1,014
Multi30k validation sentences, both shipped models: identical ids and BLEU (beam 4, alpha 0.6, batches of 64, one
thread, packed float32). Where the CPU
computes bf16 natively, also bf16 packed weights (the fast model's approximate lever) against float32, and the single-query
lever under bf16 (its explicit softmax runs in bf16 there; the fused kernel accumulates in float32).

    python tools/lever_agreement.py nbs/results/lever_agreement.json
"""
import copy, json, sys, torch
from functools import partial
from annotated_transformer.benchmarking import bleu_tokens, machine_record
from annotated_transformer.data import load_split
from annotated_transformer.evaluation import encode_sources, decode_corpus
from annotated_transformer.decoding import SearchOptions
from annotated_transformer.fast_decoding import SearchLevers, fast_beam_search
from annotated_transformer.fast_model import ModelLevers, make_fast, pack_linears
from annotated_transformer.runtime import bf16_native
from annotated_transformer.pretrained import load_model
torch.set_num_threads(1)
out = {**machine_record("python tools/lever_agreement.py " + " ".join(sys.argv[1:])), "runs": {}}
for name in ("de-en", "en-de"):
    m, codec, meta = load_model(name)                  # the shipped model, its codec, its config.json
    m = make_fast(m)                                   # the command line's model and search
    hyps_of = lambda model, search=fast_beam_search: decode_corpus(model, ids, search=search)
    pairs = load_split("val", src=name[:2], tgt=name[3:])
    ids = encode_sources(codec, [s for s, _ in pairs], m.config.max_len)[0]
    refs = [t for _, t in pairs]
    p = pack_linears(m)
    on = hyps_of(p)
    agree = lambda off: {"identical": sum(a == b for a, b in zip(on, off)),
                         "bleu_off": round(bleu_tokens(codec, off, refs)[0], 2)}
    r = {"sentences": len(ids), "updates": meta["train_state"]["step"],     # which model of that name
         "bleu_on": round(bleu_tokens(codec, on, refs)[0], 2),
         "single_query off": agree(hyps_of(make_fast(copy.deepcopy(p), ModelLevers(single_query=False)))),
         **{f"{what} off": agree(hyps_of(p, partial(fast_beam_search, levers=SearchLevers(**lever))))
            for what, lever in (("topk by chunks", dict(topk_chunk=0)),
                                ("shared cross rows", dict(lazy_cross=False)),
                                ("deferred reorder", dict(deferred_reorder=False)))}}
    if bf16_native():
        b = pack_linears(m, torch.bfloat16)
        b_on, b_off = hyps_of(b), hyps_of(make_fast(copy.deepcopy(b), ModelLevers(single_query=False)))
        r["bf16"] = {"identical_to_float32": sum(a == c for a, c in zip(on, b_on)),
                     "bleu": round(bleu_tokens(codec, b_on, refs)[0], 2),
                     "single_query off, identical": sum(a == c for a, c in zip(b_on, b_off)),
                     "single_query off, bleu": round(bleu_tokens(codec, b_off, refs)[0], 2)}
    out["runs"][name] = r
    print(name, r, flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
