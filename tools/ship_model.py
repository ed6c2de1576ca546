"""Ship a trained Multi30k checkpoint as one of the book's models (maintainers' tool; chapter "Trained models that ship").

    python tools/ship_model.py --checkpoint runs/de-en/averaged.pt --name de-en --train-result runs/de-en.json \
        --train-command "annotated-transformer train --checkpoint-dir runs/de-en --seed 0 --json"

Exports the checkpoint to annotated_transformer/models/NAME (float16 safetensors, config and vocabulary as JSON), scores
the exported model — what `annotated-transformer evaluate --model NAME` loads — on the validation set, every Multi30k test
set and the Tatoeba subset (beam 4, α 0.6), scores the float32 checkpoint on val and test_2016_flickr to show what float16
storage costs, writes MODEL_CARD.md, and prints the sha256 of SHA256SUMS to pin in `SHIPPED_SHA256SUMS` (chapter 32).
Needs the data root in $ANNOTATED_TRANSFORMER_DATA.

    python tools/ship_model.py --rescore de-en

re-scores a shipped model as it is (after a change to the search, say) and writes the result where every published score
comes from: nbs/models/NAME.json (its `sets`, `ci_subset`, `search` and `scored`), then the card's score sections from it.
The README, the chapters and the card are checked against that file (tests/test_shipped_models.py)."""
import argparse, dataclasses, json, re, shlex, subprocess, sys, time
from pathlib import Path
import torch
from annotated_transformer.data import TEST_SPLITS, TATOEBA, TEST_SET_INFO, load_split, available_test_splits
from annotated_transformer.evaluation import score_sets
from annotated_transformer.fast_decoding import fast_beam_search
from annotated_transformer.fast_model import make_fast
from annotated_transformer.decoding import SearchOptions   # beam 4, α 0.6 (§6.1)
from annotated_transformer.pretrained import (MODELS_DIR, SHIPPED, export_model, load_model, load_translator,
    file_sha256, SUMS, CARD)
from annotated_transformer.runtime import atomic_file
from annotated_transformer.benchmarking import machine_record

CI_SUBSET = 200  # the CI check re-scores the first this-many sentences of test_2016_flickr


SEARCH_RULES = {"stopping": "exact (no live beam can still beat the best finished; chapter 14)",
                "at the length limit": "only EOS may follow (force_end, fairseq's rule)"}


def search_record(options: SearchOptions) -> dict:
    "The search a score came from: SearchOptions' values and the rules that are not options."
    return {**{k: v for k, v in dataclasses.asdict(options).items() if k in ("beam_size", "length_penalty",
                                                                               "extra_len", "early_stop")},
            **SEARCH_RULES}


def score_rows(rows) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "hypotheses"} for r in rows]


def card_scores(scores: dict) -> dict[str, object]:
    "The card's score sections, from the stored result: the table, the signatures, the CI check."
    s = scores["search"]
    title = f"Scores (beam {s['beam_size']}, α {s['length_penalty']}, the exact stopping rule, EOS at the limit)"
    table = [{"set": r["set"], "sentences": r["sentences"], "BLEU": f"{r['bleu']:.2f}", "chrF": f"{r['chrf']:.2f}",
              "what it is": TEST_SET_INFO.get(r["set"], "Multi30k validation set (model selection)")}
             for r in scores["sets"]]
    sub, when = scores["ci_subset"], scores.get("scored", {})
    return {title: table,
            "Signatures": [f"BLEU: `{scores['sets'][0]['bleu_signature']}`", f"chrF2: `{scores['sets'][0]['chrf_signature']}`",
                           f"from `nbs/models/{scores['name']}.json`, scored {when.get('date', '?')} on "
                           f"{when.get('cpu', '?')} ({when.get('capability', '?')}) by `{when.get('command', '?')}`"],
            "CI check": {"set": sub["set"], "first sentences": sub["sentences"], "BLEU": f"{sub['bleu']:.2f}",
                         "chrF": f"{sub['chrf']:.2f}"}}


def replace_sections(card: str, sections: dict) -> str:
    "MODEL_CARD.md with its score sections replaced by `sections` (rendered as `render_card` does), in place."
    from annotated_transformer.pretrained import render_card
    body = render_card(sections, "x", {}).split("\n## Files")[0].split("\n", 2)[2]     # the sections alone
    parts = re.split(r"(?m)^(?=## )", card)
    keep = [p for p in parts if not re.match(r"## (Scores|Signatures|CI check)\b", p)]
    at = next(i for i, p in enumerate(keep) if p.startswith("## Float16 storage") or p.startswith("## How it was made"))
    fp16 = [re.sub(r"BLEU ([0-9.]+) with the float32 checkpoint, ([0-9.]+) with these float16 weights \(Δ ([-+0-9.]+)\)",
                   r"float16 weights Δ \3 BLEU against the float32 checkpoint", p) if p.startswith("## Float16") else p
            for p in keep]
    fp16 = [p.replace("## Float16 storage\n", "## Float16 storage (measured when the model was shipped)\n") for p in fp16]
    return "".join(fp16[:at]) + body.rstrip("\n") + "\n\n" + "".join(fp16[at:])


def scored_record(rows, subset: dict, options: SearchOptions, argv: list[str]) -> dict:
    "What nbs/models/NAME.json keeps of a scoring: every set's scores, the search, the CI subset, when, where and how."
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    rec = machine_record(shlex.join(["python", "tools/ship_model.py", *argv]))
    return dict(sets=score_rows(rows), search=search_record(options),
                ci_subset={"set": "test_2016_flickr", "sentences": CI_SUBSET, "bleu": subset["bleu"], "chrf": subset["chrf"]},
                scored={"date": rec["date"], "cpu": rec["hardware"]["cpu"], "capability": rec["hardware"]["capability"],
                        "command": rec["command"], "commit": commit})


def rescore(name: str, argv: list[str]):
    "Score the shipped model `name` as it is now; write nbs/models/NAME.json and the card's score sections."
    model, codec, meta = load_model(name)
    model = make_fast(model)                                   # scored as the command line decodes
    src, tgt, options = meta["src_lang"], meta["tgt_lang"], SearchOptions()
    names = ["val", *[s for s in available_test_splits() if s in (*TEST_SPLITS, TATOEBA)]]
    sets = {s: load_split(s, src=src, tgt=tgt) for s in names}
    rows = score_sets(model, codec, sets, options, fast_beam_search, progress=True)
    subset = score_sets(model, codec, {"test_2016_flickr": sets["test_2016_flickr"][:CI_SUBSET]}, options,
                        fast_beam_search)[0]
    path = Path("nbs/models") / f"{name}.json"
    scores = json.loads(path.read_text(encoding="utf-8"))
    scores.update(scored_record(rows, subset, options, argv))
    with atomic_file(path) as f: f.write(json.dumps(scores, indent=1, ensure_ascii=False) + "\n")
    card = MODELS_DIR / name / CARD
    new = replace_sections(card.read_text(encoding="utf-8"), card_scores(scores))
    with atomic_file(card) as f: f.write(new)
    print(json.dumps({"name": name, **{r["set"]: round(r["bleu"], 2) for r in rows}, "ci_subset": round(subset["bleu"], 2)}))


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--rescore"] and len(argv) == 2: return rescore(argv[1], argv)
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
    model = make_fast(model)                                   # scored as the command line decodes
    src, tgt = meta["src_lang"], meta["tgt_lang"]
    names = ["val", *[s for s in available_test_splits() if s in (*TEST_SPLITS, TATOEBA)]]
    sets = {s: load_split(s, src=src, tgt=tgt) for s in names}
    t = time.perf_counter()
    rows = score_sets(model, codec, sets, SearchOptions(), fast_beam_search, progress=True)
    minutes_eval = (time.perf_counter() - t) / 60
    subset = score_sets(model, codec, {"test_2016_flickr": sets["test_2016_flickr"][:CI_SUBSET]}, SearchOptions(),
                        fast_beam_search)[0]
    fp32, fcodec, _ = load_translator(a.checkpoint)
    ref = {r["set"]: r for r in score_sets(make_fast(fp32), fcodec, {s: sets[s] for s in ("val", "test_2016_flickr")},
                                           SearchOptions(), fast_beam_search)}
    got = {r["set"]: r for r in rows}
    scores = {"name": a.name, "src": src, "tgt": tgt, **scored_record(rows, subset, SearchOptions(), argv),
              "fp32": {s: ref[s]["bleu"] for s in ref}, "train": {k: res[k] for k in ("hardware", "train_time_s", "updates", "epochs")},
              "train_command": a.train_command}
    sections = card_scores(scores)                      # as --rescore writes them, and how long the decoding took
    sections["Signatures"].append(f"decoding all {sum(r['sentences'] for r in rows):,} sentences took {minutes_eval:.1f} min")
    rc = res["recipe"]
    kept = ", ".join(res["averaged"]) if res["selected"] == "averaged" else Path(res["checkpoint"]).name
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
                     "checkpoint kept": f"{res['selected']} ({kept})",
                     "val BLEU averaged / last": f"{res.get('val_bleu_averaged', '–')} / {res.get('val_bleu_last', '–')}",
                     "torch": torch.__version__, "CPU capability": torch.backends.cpu.get_cpu_capability()},
        **sections,
        "Float16 storage": [f"{s}: BLEU {ref[s]['bleu']:.2f} with the float32 checkpoint, {got[s]['bleu']:.2f} with these "
                            f"float16 weights (Δ {got[s]['bleu'] - ref[s]['bleu']:+.2f})" for s in ref],
        "How it was made": a.note or ["see the training command above"],
        "Licence": "Weights: Apache-2.0, as the code. Trained on Multi30k (research use; see its licence) — the "
                   "translations are captions-style English/German and not for production use.",
    }
    export_model(a.checkpoint, out, a.storage_dtype, card=card)
    (Path("nbs") / "models").mkdir(exist_ok=True)
    Path(f"nbs/models/{a.name}.json").write_text(json.dumps(scores, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps({"name": a.name, "pin": file_sha256(out / SUMS), "test_2016_flickr": got["test_2016_flickr"]["bleu"],
                      "fp32": ref["test_2016_flickr"]["bleu"], "subset": subset["bleu"]}))


if __name__ == "__main__":
    main()
