"""Ship a trained Multi30k checkpoint as one of the book's models (maintainers' tool; chapter "Trained models that ship").

    python tools/ship_model.py --checkpoint runs/de-en/averaged.pt --name de-en --train-result runs/de-en.json \
        --train-command "annotated-transformer train --checkpoint-dir runs/de-en --seed 0 --json"

Exports the checkpoint to annotated_transformer/models/NAME (float16 safetensors, config and vocabulary as JSON), scores
the exported model — what `annotated-transformer evaluate --model NAME` loads — on the validation set, every Multi30k test
set and the Tatoeba subset (beam 4, α 0.6), scores the float32 checkpoint on val and test_2016_flickr to show what float16
storage costs, writes MODEL_CARD.md, and prints the sha256 of SHA256SUMS to pin in `SHIPPED_SHA256SUMS` (chapter 32).
Needs the data root in $ANNOTATED_TRANSFORMER_DATA."""
import argparse, json, shlex, sys, time
from pathlib import Path
import torch
from annotated_transformer.data import TEST_SPLITS, TATOEBA, TEST_SET_INFO, load_split, available_test_splits
from annotated_transformer.evaluation import score_sets
from annotated_transformer.decoding import SearchOptions   # beam 4, α 0.6 (§6.1)
from annotated_transformer.pretrained import (MODELS_DIR, SHIPPED, export_model, load_model, load_translator,
    file_sha256, SUMS)

CI_SUBSET = 200  # the CI check re-scores the first this-many sentences of test_2016_flickr


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--name", required=True, choices=sorted(SHIPPED))
    p.add_argument("--train-result", required=True, help="the JSON `train --json` printed (times, hardware, recipe)")
    p.add_argument("--train-command", required=True, help="the exact command that trained it")
    p.add_argument("--note", action="append", default=[], help="a line for the card's 'How it was made' section")
    p.add_argument("--storage-dtype", default="float16")
    a = p.parse_args(argv)
    res = json.loads(Path(a.train_result).read_text().strip().splitlines()[-1])
    out = MODELS_DIR / a.name
    export_model(a.checkpoint, out, a.storage_dtype)                       # data files first: the card comes last
    model, codec, meta = load_model(out)
    src, tgt = meta["src_lang"], meta["tgt_lang"]
    names = ["val", *[s for s in available_test_splits() if s in (*TEST_SPLITS, TATOEBA)]]
    sets = {s: load_split(s, src=src, tgt=tgt) for s in names}
    t = time.perf_counter()
    rows = score_sets(model, codec, sets, SearchOptions(), progress=True)
    minutes_eval = (time.perf_counter() - t) / 60
    subset = score_sets(model, codec, {"test_2016_flickr": sets["test_2016_flickr"][:CI_SUBSET]}, SearchOptions())[0]
    fp32, fcodec, _ = load_translator(a.checkpoint)
    ref = {r["set"]: r for r in score_sets(fp32, fcodec, {s: sets[s] for s in ("val", "test_2016_flickr")}, SearchOptions())}
    got = {r["set"]: r for r in rows}
    table = [{"set": r["set"], "sentences": r["sentences"], "BLEU": f"{r['bleu']:.2f}", "chrF": f"{r['chrf']:.2f}",
              "what it is": TEST_SET_INFO.get(r["set"], "Multi30k validation set (model selection)")} for r in rows]
    rc = res["recipe"]
    card = {
        "Direction": f"{SHIPPED[a.name]} ({src}→{tgt}), the Transformer of “Attention Is All You Need” at the book's `small` size",
        "Data": "Multi30k task 1 (image captions): 29,000 training pairs; the validation set (1,014 pairs) chose between "
                "the averaged and the last checkpoint; nothing else was tuned on it in this run, and no test set was seen.",
        "Model": {"recipe": res["recipe_name"], "parameters": f"{res['parameters']:,}",
                  "vocabulary": f"joint BPE, {res['src_vocab_size']:,} tokens, three-way weight tying",
                  "weights": f"{a.storage_dtype} safetensors (computes in float32)"},
        "Recipe": {k: v for k, v in rc.items()},
        "Training command": a.train_command,
        "Shipping command": shlex.join(["python", "tools/ship_model.py", *(argv if argv is not None else sys.argv[1:])]),
        "Training": {"hardware": res["hardware"], "training minutes": f"{res['train_time_s'] / 60:.1f}",
                     "updates": res["updates"], "epochs": res["epochs"],
                     "checkpoint kept": f"{res['selected']} ({', '.join(res.get('averaged') or []) or 'last'})",
                     "val BLEU averaged / last": f"{res.get('val_bleu_averaged', '–')} / {res.get('val_bleu_last', '–')}",
                     "torch": torch.__version__, "CPU capability": torch.backends.cpu.get_cpu_capability()},
        "Scores (beam 4, α 0.6)": table,
        "Signatures": [f"BLEU: `{rows[0]['bleu_signature']}`", f"chrF2: `{rows[0]['chrf_signature']}`",
                       f"decoding all {sum(r['sentences'] for r in rows):,} sentences took {minutes_eval:.1f} min"],
        "Float16 storage": [f"{s}: BLEU {ref[s]['bleu']:.2f} with the float32 checkpoint, {got[s]['bleu']:.2f} with these "
                            f"float16 weights (Δ {got[s]['bleu'] - ref[s]['bleu']:+.2f})" for s in ref],
        "CI check": {"set": "test_2016_flickr", "first sentences": CI_SUBSET, "BLEU": f"{subset['bleu']:.2f}",
                     "chrF": f"{subset['chrf']:.2f}"},
        "How it was made": a.note or ["see the training command above"],
        "Licence": "Weights: Apache-2.0, as the code. Trained on Multi30k (research use; see its licence) — the "
                   "translations are captions-style English/German and not for production use.",
    }
    export_model(a.checkpoint, out, a.storage_dtype, card=card)
    scores = {"name": a.name, "src": src, "tgt": tgt, "sets": [{k: v for k, v in r.items() if k != "hypotheses"} for r in rows],
              "ci_subset": {"set": "test_2016_flickr", "sentences": CI_SUBSET, "bleu": subset["bleu"], "chrf": subset["chrf"]},
              "fp32": {s: ref[s]["bleu"] for s in ref}, "train": {k: res[k] for k in ("hardware", "train_time_s", "updates", "epochs")},
              "train_command": a.train_command}
    (Path("nbs") / "models").mkdir(exist_ok=True)
    Path(f"nbs/models/{a.name}.json").write_text(json.dumps(scores, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps({"name": a.name, "pin": file_sha256(out / SUMS), "test_2016_flickr": got["test_2016_flickr"]["bleu"],
                      "fp32": ref["test_2016_flickr"]["bleu"], "subset": subset["bleu"]}))


if __name__ == "__main__":
    main()
