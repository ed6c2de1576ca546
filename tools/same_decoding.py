"""Same decoding before and after a refactor: the shipped models' ids on validation sentences, for the readable
search, the fast search, greedy, and the n-best lists, recorded to JSON and compared.

    python tools/same_decoding.py --out before.json          # on the old commit
    python tools/same_decoding.py --out after.json           # on the new one, same machine
    python tools/same_decoding.py --compare before.json after.json

Bit-for-bit only on one machine (CPUs round differently), so this is a recorded comparison, not a CI test. Needs
the Multi30k validation set under the data root (`ANNOTATED_TRANSFORMER_DATA`)."""
import argparse, hashlib, json, subprocess, sys
from pathlib import Path
import torch

def nbest_lists(model, ids: list[list[int]], n_best: int, beam_size: int, **kw) -> dict[str, list]:
    "The n-best lists, one sentence at a time, through whichever n-best search this commit has: ids, and scores."
    from annotated_transformer import multi30k
    if hasattr(multi30k, "nbest_search"):        # before "One of each": a one-sentence search of its own
        from annotated_transformer.data import sentence_ids      # its ids end in EOS; decode_corpus strips it
        lists = [[(s, sentence_ids(h)) for s, h in multi30k.nbest_search(model, torch.tensor([x]), n_best, beam_size)]
                 for x in ids]
    else:
        from annotated_transformer.decoding import decode_corpus
        lists = decode_corpus(model, ids, beam_size=beam_size, n_best=n_best, **{"batch_size": 1, **kw})
    return {"ids": [[h for _, h in hyps] for hyps in lists], "scores": [[s for s, _ in hyps] for hyps in lists]}

def _ids(v): return v["ids"] if isinstance(v, dict) else v

def run_all(n: int) -> dict:
    from annotated_transformer.pretrained import load_model
    from annotated_transformer.data import load_split
    from annotated_transformer.evaluation import encode_sources
    from annotated_transformer.decoding import decode_corpus
    from annotated_transformer.runtime import hardware_summary
    torch.set_num_threads(1)
    res = {"hardware": hardware_summary(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
           "torch": torch.__version__, "sentences": n,
           "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()}
    for name in ("de-en", "en-de"):
        model, codec, meta = load_model(name)
        pairs = load_split("val", src=meta["src_lang"], tgt=meta["tgt_lang"])[:n]
        ids, _ = encode_sources(codec, [s for s, _ in pairs], model.config.max_len)
        with torch.inference_mode():
            runs = {"readable beam 4": decode_corpus(model, ids, beam_size=4, fast=False),
                    "fast beam 4": decode_corpus(model, ids, beam_size=4, fast=True),
                    "greedy (fast)": decode_corpus(model, ids, beam_size=1, fast=True),
                    "greedy (readable)": decode_corpus(model, ids, beam_size=1, fast=False),
                    "n-best 4 of beam 4": nbest_lists(model, ids, 4, 4, fast=False)}
            if not hasattr(__import__("annotated_transformer.multi30k").multi30k, "nbest_search"):
                runs["n-best 4 of beam 4 (fast, batches of 64)"] = nbest_lists(model, ids, 4, 4, batch_size=64)
        for k, v in runs.items():   # the digest is of the ids; n-best scores are compared within 1e-4
            res[f"{name}/{k}"] = {"sha256": hashlib.sha256(json.dumps(_ids(v)).encode()).hexdigest()[:16], "out": v}
    return res

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out"); ap.add_argument("--compare", nargs=2); ap.add_argument("--sentences", type=int, default=300)
    a = ap.parse_args()
    if a.compare:
        x, y = (json.load(open(f)) for f in a.compare)
        base = lambda k: k.split(" (fast, batches")[0]     # a newer run of a recorded one: compared with it
        keys = [k for k in y if "/" in k and base(k) in x] if any(base(k) != k for k in y) else [k for k in x if "/" in k]
        keys = sorted(set(keys) | {k for k in x if "/" in k})
        same = []
        for k in keys:
            old, new = x[base(k)]["out"], y.get(k, {}).get("out")
            diff = [] if new is None else [i for i, (p, q) in enumerate(zip(_ids(old), _ids(new))) if p != q]
            gap = max((abs(a - b) for p, q in zip(old["scores"], new["scores"]) for a, b in zip(p, q)), default=0.0) \
                if isinstance(old, dict) and new is not None and not diff else 0.0
            ok = new is not None and not diff and len(_ids(old)) == len(_ids(new)) and gap <= 1e-4
            if ok: same.append(k)
            print(("same " if ok else "DIFF ") + k + ("" if new is not None else ": missing")
                  + (f": {len(diff)} sentences differ, first {diff[:5]}" if diff else "")
                  + (f" (n-best scores within {gap:.1e})" if isinstance(old, dict) and new is not None else ""))
        print(f"{len(same)}/{len(keys)} decodings identical on {x['sentences']} validation sentences "
              f"({x['commit']} vs {y['commit']}, {x['hardware']})")
        sys.exit(0 if len(same) == len(keys) else 1)
    res = run_all(a.sentences)
    for k, v in res.items(): print(k, v["sha256"] if isinstance(v, dict) else v)
    if a.out: Path(a.out).write_text(json.dumps(res) + "\n")
