"""MKL's packed sgemm (`cblas_sgemm_pack`, the packing CTranslate2 can use on Intel) against oneDNN's (what
`pack_linears` does) in decoding: the same model with every `PackedLinear` swapped for a layer that multiplies by an
MKL-packed copy of its weight. One thread; 1,000 test_2016_flickr sentences, beam 4, alpha 0.6, batches of 64, three
interleaved runs (medians); then single-sentence decoding, p50 over 50 sentences; identical ids counted.

    python tools/mkl_packed.py nbs/results/mkl_packed_avx512.json
"""
import copy, json, statistics, sys, time, torch
from torch import nn
from annotated_transformer.ctranslate2_export import _bench_inputs, _bleu_tokens, _interleaved, _resolve
from annotated_transformer.decoding import PackedLinear, decode_corpus, pack_linears
from annotated_transformer.runtime import hardware_summary


class MklPackedLinear(nn.Module):
    "A linear layer for inference: its weight packed once by MKL (`_mkl_reorder_linear_weight`), float32."
    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.weight, self.bias = linear.weight, linear.bias
        with torch.inference_mode(): self.packed = torch.ops.mkl._mkl_reorder_linear_weight(linear.weight.detach(), 64)
    def forward(self, x): return torch.ops.mkl._mkl_linear(x, self.packed, self.weight, self.bias, 64)


def with_mkl(model: nn.Module) -> nn.Module:
    "A copy of `model` with each `PackedLinear` replaced by an `MklPackedLinear` on the same weights."
    m = copy.deepcopy(model)
    for name, mod in list(m.named_modules()):
        for child_name, child in list(mod.named_children()):
            if isinstance(child, PackedLinear): setattr(mod, child_name, MklPackedLinear(child))
    return m


torch.set_num_threads(1)
m, codec, _ = _resolve("de-en", None)
_, _, refs, ids = _bench_inputs(m, codec, "test_2016_flickr", None, 1000, None)
engines = {"oneDNN packed (pack_linears)": pack_linears(m)}
engines["MKL packed"] = with_mkl(engines["oneDNN packed (pack_linears)"])
runs = _interleaved({k: (lambda p=p: decode_corpus(p, ids)) for k, p in engines.items()}, 3)
hyps = {k: h for k, (_, _, h) in runs.items()}
out = {"command": "python tools/mkl_packed.py " + " ".join(sys.argv[1:]), "hardware": hardware_summary(as_dict=True),
       "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
       "batch": {k: {"seconds": [round(t, 3) for t in ts], "sentences_per_s": round(len(ids) / med, 1),
                     "bleu": round(_bleu_tokens(codec, hyps[k], refs)[0], 2)} for k, (med, ts, _) in runs.items()},
       "identical": sum(a == b for a, b in zip(*hyps.values())), "of": len(ids)}
ms = {k: [] for k in engines}
for s in ids[:50]:
    for k, p in engines.items():
        t = time.perf_counter(); decode_corpus(p, [s]); ms[k].append(1e3 * (time.perf_counter() - t))
out["single_sentence_p50_ms"] = {k: round(statistics.median(v), 1) for k, v in ms.items()}
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(json.dumps(out, indent=1))
