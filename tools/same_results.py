"""Same results before and after a refactor: train the copy task and a tiny Multi30k run through the CLI, then print a
digest of every tensor and number in the final checkpoints (model, optimizer, scheduler, train state, random states).

    python tools/same_results.py --out before.json      # on the old commit
    python tools/same_results.py --out after.json       # on the new one, same machine
    python tools/same_results.py --compare before.json after.json

Bit-for-bit only on one machine (CPUs round differently), so this is a recorded comparison, not a CI test."""
import argparse, hashlib, json, os, subprocess, sys, tempfile
from pathlib import Path
import torch

RUNS = {  # name -> CLI arguments (after `annotated-transformer`), each a few seconds on one CPU thread
    "copy": ["train", "--task", "copy", "--seed", "3", "--max-train-pairs", "600", "--batch-tokens", "300",
             "--max-steps", "12", "--save-every", "6", "--device", "cpu"],
    "multi30k_tiny": ["train", "--task", "multi30k", "--preset", "tiny", "--data-dir", "{sample}", "--seed", "1",
                      "--max-steps", "12", "--save-every", "6", "--device", "cpu"],
}

def digest(x, h):
    "Feed `x` (nested dicts/lists of tensors and plain values) into hash `h` in a fixed order."
    if isinstance(x, torch.Tensor): h.update(str((x.dtype, tuple(x.shape))).encode()); h.update(x.detach().cpu().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes())
    elif isinstance(x, dict):
        for k in sorted(x, key=str): h.update(repr(k).encode()); digest(x[k], h)
    elif isinstance(x, (list, tuple)):
        for v in x: digest(v, h)
    else: h.update(repr(x).encode())

def part_digests(ckpt: dict) -> dict:
    out = {}
    for k in ("model", "optimizer", "scheduler", "train_state", "rng", "config"):
        h = hashlib.sha256(); digest(ckpt.get(k), h); out[k] = h.hexdigest()[:16]
    return out

def run_all() -> dict:
    from annotated_transformer import __file__ as pkg
    sample = str(Path(pkg).parent / "sample-data" / "tatoeba-de-en")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ANNOTATED_TRANSFORMER_DATA": sample, "CUDA_VISIBLE_DEVICES": ""}
    res = {"cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__,
           "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()}
    for name, args in RUNS.items():
        with tempfile.TemporaryDirectory() as d:
            argv = [a.format(sample=sample) for a in args] + ["--checkpoint-dir", d]
            r = subprocess.run([sys.executable, "-m", "annotated_transformer", *argv], env=env, capture_output=True, text=True)
            if r.returncode: sys.exit(f"{name} failed:\n{r.stderr[-2000:]}")
            for p in sorted(Path(d).glob("*.pt")):
                ck = torch.load(p, map_location="cpu", weights_only=True)
                res[f"{name}/{p.name}"] = part_digests(ck)
    return res

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out"); ap.add_argument("--compare", nargs=2)
    a = ap.parse_args()
    if a.compare:
        x, y = (json.load(open(f)) for f in a.compare)
        keys = [k for k in x if "/" in k]
        same = [k for k in keys if x[k] == y.get(k)]
        for k in keys: print(("same " if k in same else "DIFF ") + k, "" if k in same else (x[k], y.get(k)))
        print(f"{len(same)}/{len(keys)} checkpoints bit-identical ({x['commit']} vs {y['commit']}, {x['cpu_capability']})")
        sys.exit(0 if len(same) == len(keys) else 1)
    res = run_all()
    print(json.dumps(res, indent=1))
    if a.out: Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
