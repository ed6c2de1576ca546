"""Where the batch decoding gap to CTranslate2 goes, on this CPU, one thread: chapter 14's exact stopping rule against
its `early_stop` option and CTranslate2 float32 (same weights, 1,000 test_2016_flickr sentences, beam 4, alpha 0.6,
batches of 64, three interleaved runs, medians), then `torch.profiler` over one 300-sentence decode (operators' self
time), 40 sentences decoded one at a time (steps, operator calls per step), and the matrix products of a step alone,
in GFLOP/s, at 256 rows (a batch of 64 sentences' beams) and at 4 (one sentence's): packed by oneDNN (what
`pack_linears` does), by `F.linear` (MKL's sgemm), and packed by MKL (`cblas_sgemm_pack`, which CTranslate2 can use
on Intel).

    python tools/decode_gap.py nbs/results/decode_gap_avx2.json
"""
import json, sys, tempfile, time, torch
import torch.nn.functional as F
from annotated_transformer.ctranslate2_export import (_bench_inputs, _bleu_tokens, _interleaved, _resolve,
                                                      decode_ctranslate2, export_ctranslate2, load_ctranslate2)
from annotated_transformer.decoding import PackedLinear, decode_corpus, pack_linears
from annotated_transformer.runtime import hardware_summary

torch.set_num_threads(1)
out = {"command": "python tools/decode_gap.py " + " ".join(sys.argv[1:]), "hardware": hardware_summary(as_dict=True),
       "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
m, codec, _ = _resolve("de-en", None)
_, _, refs, ids = _bench_inputs(m, codec, "test_2016_flickr", None, 1000, None)
p = pack_linears(m)
ct2_dir = tempfile.mkdtemp() + "/ct2"
export_ctranslate2(m, ct2_dir, codec=codec)
tr = load_ctranslate2(ct2_dir, compute_type="float32")[0]
engines = {"ours, exact rule": lambda: decode_corpus(p, ids),
           "ours, early_stop": lambda: decode_corpus(p, ids, early_stop=True),
           "CTranslate2 float32": lambda: decode_ctranslate2(tr, codec, ids, max_len=m.config.max_len)}
timed_runs = _interleaved(engines, 3)                        # name -> (median s, all s, hypotheses)
hyps = {k: h for k, (_, _, h) in timed_runs.items()}
ct2 = timed_runs["CTranslate2 float32"][0]
same = lambda a, b: sum(x == y for x, y in zip(hyps[a], hyps[b]))
out["speed"] = {k: {"seconds": [round(t, 3) for t in ts], "sentences_per_s": round(len(ids) / med, 1),
                    "vs_ct2_float32": round(ct2 / med, 3), "bleu": round(_bleu_tokens(codec, hyps[k], refs)[0], 2)}
                for k, (med, ts, _) in timed_runs.items()}
out["identical"] = {"exact rule vs CTranslate2": same("ours, exact rule", "CTranslate2 float32"),
                    "early_stop vs CTranslate2": same("ours, early_stop", "CTranslate2 float32"),
                    "exact rule vs early_stop": same("ours, exact rule", "ours, early_stop"), "of": len(ids)}

from torch.profiler import ProfilerActivity, profile
with profile(activities=[ProfilerActivity.CPU]) as prof: decode_corpus(p, ids[:300])
ops = prof.key_averages()
total = sum(e.self_cpu_time_total for e in ops)
out["profile_300"] = [{"op": e.key, "share": round(e.self_cpu_time_total / total, 3), "calls": e.count,
                       "ms_per_call": round(e.self_cpu_time_total / e.count / 1e3, 3)}
                      for e in sorted(ops, key=lambda e: -e.self_cpu_time_total)[:12]]

# one sentence at a time (what `translate` does interactively): its steps, and the operator calls in each
singles = ids[:40]
for s in singles[:5]: decode_corpus(p, [s])
t = time.perf_counter()
for s in singles: decode_corpus(p, [s])
wall = time.perf_counter() - t
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for s in singles: decode_corpus(p, [s])
ops = {e.key: e for e in prof.key_averages()}
steps = ops["aten::_log_softmax"].count                       # one log-softmax over the vocabulary per step
op_total = sum(e.self_cpu_time_total for e in ops.values())
out["single_sentence_40"] = {"ms_per_sentence": round(1e3 * wall / len(singles), 1), "steps": steps,
                             "ms_per_step": round(1e3 * wall / steps, 2),
                             "operator_calls_per_step": round(sum(e.count for e in ops.values()) / steps),
                             "packed_products_share": round(ops["mkldnn::_linear_pointwise"].self_cpu_time_total
                                                            / op_total, 3)}

def timed(f, n=30):
    f(); t = time.perf_counter()
    for _ in range(n): f()
    return (time.perf_counter() - t) / n
gemm = {}
for rows in (256, 4):
    for what, (i, o) in {"output layer": (256, 8000), "Q,K,V": (256, 768), "FFN in": (256, 1024),
                         "FFN out": (1024, 256), "W^O": (256, 256)}.items():
        lin = torch.nn.Linear(i, o); pk, x = PackedLinear(lin), torch.randn(rows, i)
        with torch.inference_mode():
            mkl_w = torch.ops.mkl._mkl_reorder_linear_weight(lin.weight.detach(), rows)
            gf = lambda f: round(2 * rows * i * o / timed(f, 30 if rows > 64 else 500) / 1e9, 1)
            gemm[f"{what} ({rows}x{i}x{o})"] = {
                "packed_gflops": gf(lambda: pk(x)), "f_linear_gflops": gf(lambda: F.linear(x, lin.weight, lin.bias)),
                "mkl_packed_gflops": gf(lambda: torch.ops.mkl._mkl_linear(x, mkl_w, lin.weight, lin.bias, rows))}
rows = 256
x = torch.randn(rows, 8000)
out["gemm_gflops"], out["log_softmax_256x8000_ms"] = gemm, round(timed(lambda: x.log_softmax(-1)) * 1e3, 2)
out["exp_256x8000_ms"] = round(timed(lambda: x.exp()) * 1e3, 2)
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(json.dumps(out, indent=1))
