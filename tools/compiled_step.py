"""`torch.compile` of the decoder step, measured as a lever of the batch decode (issue 24, item 1): the shipped
de→en model, 1,000 test_2016_flickr sentences, beam 4, alpha 0.6, batches of 64, one thread, chapter 14's
`fast_beam_search` unchanged. Each step after the first (which fills the caches eagerly) runs one compiled
function: the embedding, the three post-norm layers (self-attention over the cache with its deferred reorder, the
shared cross-attention rows, the feed-forward) and the generator's log-softmax, compiled by inductor with
`dynamic=True` (the batch, the cache length and the source length change) and `freezing=True` (inductor packs the
weights itself). Reported: the first pass over the corpus with inductor's on-disk cache empty (compiles and
recompiles included), the same first pass in a new process with that cache filled (what a second `evaluate` would
pay), the graphs compiled, then the sentences/s of eager (`pack_linears`), compiled and CTranslate2 float32, three
interleaved runs, medians, and identical ids against eager.

    python tools/compiled_step.py nbs/results/compiled_step_avx512.json [--sentences 1000]

With `--singles N`: latency instead, the first N test sentences decoded one at a time (what `translate` does),
each by eager, the compiled step (compiled on all N once before) and CTranslate2 in turn; p50 of each.

    python tools/compiled_step.py nbs/results/compiled_step_latency_avx512.json --singles 40
"""
import argparse, json, math, os, statistics, subprocess, sys, tempfile, time, torch
import torch.nn.functional as F
from torch import nn
from annotated_transformer.ctranslate2_export import (_bench_inputs, _bleu_tokens, _interleaved, _resolve,
                                                      decode_ctranslate2, export_ctranslate2, load_ctranslate2)
from annotated_transformer.decoding import decode_corpus, pack_linears
from annotated_transformer.runtime import hardware_summary


class Step(nn.Module):
    "One decoding step after the first, as one function of tensors: (b, 1) ids -> (b, vocab) log-probs."
    def __init__(self, m):
        super().__init__()
        self.m, c = m, m.config
        self.H, self.dk, self.d = c.n_heads, c.d_model // c.n_heads, c.d_model

    def forward(self, tok, pos, mask, rows, sk: list, sv: list, ck: list, cv: list):
        m, H, dk, d = self.m, self.H, self.dk, self.d
        x = m.tgt_embed.embed.lut(tok) * math.sqrt(d) + m.tgt_embed.pos.pe[pos]     # (b, 1, d)
        b, mb = x.shape[0], ck[0].shape[0]
        new_k, new_v = [], []
        for i, L in enumerate(m.decoder.layers):
            q, k, v = L.self_attn.in_proj(x).view(b, 1, 3, H, dk).permute(2, 0, 3, 1, 4)  # each (b, H, 1, dk)
            K = torch.cat([sk[i].index_select(0, rows), k], 2)                          # (b, H, T+1, dk)
            V = torch.cat([sv[i].index_select(0, rows), v], 2)
            a = ((q @ K.transpose(-2, -1)) / math.sqrt(dk)).softmax(-1) @ V            # (b, H, 1, dk)
            x = L.sublayer[0].norm(x + L.self_attn.out_proj(a.transpose(1, 2).reshape(b, 1, d)))
            W, bias = L.src_attn.in_proj.weight, L.src_attn.in_proj.bias
            q = F.linear(x, W[:d], bias[:d]).view(mb, -1, H, dk).transpose(1, 2)       # (mb, H, g, dk)
            s = ((q @ ck[i].transpose(-2, -1)) / math.sqrt(dk)).masked_fill(~mask, torch.finfo(x.dtype).min)
            a = s.softmax(-1) @ cv[i]                                                  # (mb, H, g, dk)
            x = L.sublayer[1].norm(x + L.src_attn.out_proj(a.transpose(1, 2).reshape(b, 1, d)))
            x = L.sublayer[2].norm(x + L.feed_forward.w_2(F.relu(L.feed_forward.w_1(x))))
            new_k.append(K); new_v.append(V)
        return F.log_softmax(m.generator.proj(x[:, 0]), -1).float(), new_k, new_v


class Compiled(nn.Module):
    "The model, its decoder step compiled: what `fast_beam_search` calls (encode, decode, generator)."
    def __init__(self, m):
        super().__init__()
        self.m, self.config, self.decoder = m, m.config, m.decoder
        self.step = torch.compile(Step(m), dynamic=True, options={"freezing": True})
        self._logp = None

    def encode(self, src, src_mask): return self.m.encode(src, src_mask)

    def decode(self, memory, mask, tgt, tgt_mask, cache):
        if cache.length == 0:                  # the first step fills the caches (and the cross keys) eagerly
            h = self.m.decode(memory, mask, tgt, tgt_mask, cache)
            self._logp = None
            return h
        sa = [layer["self_attn"] for layer in cache.layers]
        rows = sa[0].get("rows")
        for e in sa: e.pop("rows", None)
        if rows is None: rows = torch.arange(tgt.shape[0])
        ca = [layer["src_attn"] for layer in cache.layers]
        self._logp, ks, vs = self.step(tgt, torch.tensor([cache.length]), mask, rows,
                                       [e["k"] for e in sa], [e["v"] for e in sa],
                                       [e["k"] for e in ca], [e["v"] for e in ca])
        for e, k, v in zip(sa, ks, vs): e["k"], e["v"] = k, v
        cache.length += 1
        return tgt.new_zeros(tgt.shape[0], 1, 1)   # the step's output is the log-probs, below

    def generator(self, h):
        return self.m.generator(h) if self._logp is None else self._logp


def first_pass(m, ids) -> float:
    "Seconds of the compiled step's first pass over `ids`: its compiles (or cache loads) and recompiles."
    t = time.perf_counter()
    decode_corpus(Compiled(m).eval(), ids)
    return time.perf_counter() - t


def ct2_float32(m, codec):
    "A CTranslate2 float32 translator on the model's weights (exported to a temporary folder)."
    ct2_dir = tempfile.mkdtemp() + "/ct2"
    export_ctranslate2(m, ct2_dir, codec=codec)
    return load_ctranslate2(ct2_dir, compute_type="float32")[0]


def latency(m, codec, singles, out, path):
    "p50 milliseconds per sentence, one at a time: eager, the compiled step, CTranslate2 float32."
    eager, comp = pack_linears(m), Compiled(m).eval()
    t = time.perf_counter()
    for s in singles: decode_corpus(comp, [s])                   # compiles its graphs for one sentence
    compile_s = time.perf_counter() - t
    tr = ct2_float32(m, codec)
    engines = {"ours eager (pack_linears)": lambda s: decode_corpus(eager, [s]),
               "ours compiled step": lambda s: decode_corpus(comp, [s]),
               "CTranslate2 float32": lambda s: decode_ctranslate2(tr, codec, [s], max_len=m.config.max_len)}
    ms, hyps = {k: [] for k in engines}, {k: [] for k in engines}
    for s in singles[:5]:
        for f in engines.values(): f(s)
    for s in singles:
        for k, f in engines.items():
            t = time.perf_counter(); hyps[k] += f(s); ms[k].append(1e3 * (time.perf_counter() - t))
    out["first_pass_compile_s"] = round(compile_s, 1)
    out["latency_p50_ms"] = {k: round(statistics.median(v), 1) for k, v in ms.items()}
    out["identical"] = {"compiled vs eager": sum(x == y for x, y in zip(hyps["ours compiled step"],
                                                                       hyps["ours eager (pack_linears)"])),
                        "of": len(singles)}
    print(json.dumps(out, indent=1))
    with open(path, "w") as f: json.dump(out, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("output")
    ap.add_argument("--sentences", type=int, default=1000)
    ap.add_argument("--first-pass-only", action="store_true", help="print the first pass's seconds, and stop")
    ap.add_argument("--singles", type=int, default=0, help="latency of this many sentences one at a time")
    a = ap.parse_args()
    torch.set_num_threads(1)
    m, codec, _ = _resolve("de-en", None)
    _, _, refs, ids = _bench_inputs(m, codec, "test_2016_flickr", None, a.sentences, None)
    if a.first_pass_only: return print(first_pass(m, ids))
    flag = f"--singles {a.singles}" if a.singles else f"--sentences {a.sentences}"
    out = {"command": f"python tools/compiled_step.py {a.output} {flag}",
           "hardware": hardware_summary(as_dict=True), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if a.singles: return latency(m, codec, ids[:a.singles], out, a.output)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor_")   # empty: a cold start
    cold = first_pass(m, ids)
    warm = subprocess.run([sys.executable, __file__, a.output, "--sentences", str(a.sentences), "--first-pass-only"],
                          capture_output=True, text=True, check=True, env=os.environ).stdout.split()[-1]
    out["compile"] = {"first_pass_cold_cache_s": round(cold, 1), "first_pass_warm_cache_new_process_s":
                      round(float(warm), 1), "graphs": torch._dynamo.utils.counters["stats"]["unique_graphs"]}
    eager, comp = pack_linears(m), Compiled(m).eval()
    decode_corpus(comp, ids)                                      # its graphs, before the timed runs
    tr = ct2_float32(m, codec)
    engines = {"ours eager (pack_linears)": lambda: decode_corpus(eager, ids),
               "ours compiled step": lambda: decode_corpus(comp, ids),
               "CTranslate2 float32": lambda: decode_ctranslate2(tr, codec, ids, max_len=m.config.max_len)}
    runs = _interleaved(engines, 3)                               # name -> (median s, all s, hypotheses)
    hyps, ct2 = {k: h for k, (_, _, h) in runs.items()}, runs["CTranslate2 float32"][0]
    same = lambda x, y: sum(p == q for p, q in zip(hyps[x], hyps[y]))
    out["speed"] = {k: {"seconds": [round(t, 3) for t in ts], "sentences_per_s": round(len(ids) / med, 1),
                        "vs_ct2_float32": round(ct2 / med, 3), "bleu": round(_bleu_tokens(codec, hyps[k], refs)[0], 2)}
                    for k, (med, ts, _) in runs.items()}
    out["identical"] = {"compiled vs eager": same("ours compiled step", "ours eager (pack_linears)"),
                        "compiled vs CTranslate2": same("ours compiled step", "CTranslate2 float32"),
                        "of": len(ids)}
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof: decode_corpus(comp, ids[:300])
    ops = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in ops)
    out["profile_300"] = [{"op": e.key[:40], "share": round(e.self_cpu_time_total / total, 3), "calls": e.count}
                          for e in sorted(ops, key=lambda e: -e.self_cpu_time_total)[:8]]
    print(json.dumps(out, indent=1))
    with open(a.output, "w") as f: json.dump(out, f, indent=1)


if __name__ == "__main__": main()
