"""Dev-set evidence from the checkpoints a run saved (hard links of its step_*.pt, kept in runs/keep-NAME
while it trained): val BLEU (beam 4, α 0.6) of checkpoint averages, one line each in
nbs/models/recipe-runs.jsonl.
Usage: python tools/val_averages.py NAME SRC TGT LABEL=STEPS ...   (STEPS: comma-separated update numbers)"""
import json, os, sys, time
from pathlib import Path
import torch
from annotated_transformer.checkpoints import average_checkpoints, load_checkpoint, model_from_checkpoint
from annotated_transformer.data import load_split, codec_from_dict
from annotated_transformer.evaluation import evaluate_bleu
from annotated_transformer.decoding import SearchOptions
from annotated_transformer.fast_decoding import fast_beam_search
from annotated_transformer.fast_model import make_fast
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
name, src, tgt, *specs = sys.argv[1:]
keep = Path(f"runs/keep-{name}")
val = load_split("val", None, src=src, tgt=tgt)
out = Path("nbs/models/recipe-runs.jsonl")
for spec in specs:
    label, steps = spec.split("=")
    paths = [keep / f"step_{int(s):08d}.pt" for s in steps.split(",")]
    ck = average_checkpoints(paths) if len(paths) > 1 else load_checkpoint(paths[0])
    model = make_fast(model_from_checkpoint(ck)).eval()        # as the command line decodes
    codec = codec_from_dict(ck["extra"]["vocab"], ck["config"])
    t = time.perf_counter()
    bleu, _ = evaluate_bleu(model, codec, val, SearchOptions(beam_size=4, length_penalty=0.6), fast_beam_search)
    row = {"run": name, "label": label, "steps": [int(s) for s in steps.split(",")],
           "val_bleu": round(bleu.score, 2), "signature": bleu.signature,
           "decode_s": round(time.perf_counter() - t, 1), "threads": torch.get_num_threads(),
           "cpu_capability": torch.backends.cpu.get_cpu_capability(),
           "command": " ".join(["python", "tools/val_averages.py", name, src, tgt, spec])}
    print(json.dumps(row), flush=True)
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")
