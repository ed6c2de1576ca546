"""Same results before and after a refactor: train the copy task and a tiny Multi30k run through the CLI, then print a
digest of every tensor and number in the final checkpoints (model, optimizer, scheduler, train state, random states).

    python tools/same_results.py --out before.json      # on the old commit
    python tools/same_results.py --out after.json       # on the new one, same machine
    python tools/same_results.py --compare before.json after.json
    python tools/same_results.py --levers-off --out after_exact.json   # the new code with its speed levers off

Bit-for-bit only on one machine (CPUs round differently), so this is a recorded comparison, not a CI test.

`--levers-off` runs the same commands with every speed lever that changes rounding switched to the exact computation it
replaced (`LEVERS_OFF`: fields of `training.FitOptions`, set in every call of `fit` by a wrapper installed before the CLI
is imported, in the CLI's own process). A commit from
before a lever, compared with a later commit run with `--levers-off`, must still give identical digests; without the
flag the later commit's digests record what the levers change."""
import argparse, hashlib, json, os, subprocess, sys, tempfile
from pathlib import Path
import torch

RUNS = {  # name -> CLI arguments (after `annotated-transformer`), each a few seconds on one CPU thread
    "copy": ["train", "--task", "copy", "--seed", "3", "--max-train-pairs", "600", "--batch-tokens", "300",
             "--max-steps", "12", "--save-every", "6", "--device", "cpu"],
    "multi30k_tiny": ["train", "--task", "multi30k", "--recipe", "tiny", "--data-dir", "{sample}", "--seed", "1",
                      "--max-steps", "12", "--save-every", "6", "--device", "cpu"],
}

LEVERS_OFF = {"nonpad_logits": False}  # FitOptions' speed levers that change rounding -> their exact setting

# `python -m annotated_transformer ARGS`, with fit's levers switched off first: `training.fit` is replaced, before the CLI
# (and the chapters that import fit) are imported, by a wrapper that sets LEVERS_OFF in the options of every call
_BOOT = """
import dataclasses, functools, inspect, json, sys
from annotated_transformer import training
exact, fit = json.loads(sys.argv.pop(1)), training.fit
@functools.wraps(fit)
def fit_levers_off(*args, **kwargs):
    call = inspect.signature(fit).bind(*args, **kwargs)
    options = call.arguments.get("options") or training.FitOptions()
    call.arguments["options"] = dataclasses.replace(options, **exact)
    return fit(*call.args, **call.kwargs)
training.fit = fit_levers_off
from annotated_transformer.cli import main
sys.argv[0] = "annotated-transformer"
sys.exit(main())
"""

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

def run_all(levers_off: bool=False) -> dict:
    from annotated_transformer import __file__ as pkg
    sample = str(Path(pkg).parent / "sample-data" / "tatoeba-de-en")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ANNOTATED_TRANSFORMER_DATA": sample, "CUDA_VISIBLE_DEVICES": ""}
    res = {"cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__,
           "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
           "levers_off": levers_off}
    launch = [sys.executable, "-c", _BOOT, json.dumps(LEVERS_OFF)] if levers_off else [sys.executable, "-m", "annotated_transformer"]
    for name, args in RUNS.items():
        with tempfile.TemporaryDirectory() as d:
            argv = [a.format(sample=sample) for a in args] + ["--checkpoint-dir", d]
            r = subprocess.run([*launch, *argv], env=env, capture_output=True, text=True)
            if r.returncode: sys.exit(f"{name} failed:\n{r.stderr[-2000:]}")
            for p in sorted(Path(d).glob("*.pt")):
                ck = torch.load(p, map_location="cpu", weights_only=True)
                res[f"{name}/{p.name}"] = part_digests(ck)
    return res

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out"); ap.add_argument("--compare", nargs=2)
    ap.add_argument("--levers-off", action="store_true", help=f"run with fit's rounding-changing speed levers off: {LEVERS_OFF}")
    a = ap.parse_args()
    if a.compare:
        x, y = (json.load(open(f)) for f in a.compare)
        keys = [k for k in x if "/" in k]
        same = [k for k in keys if x[k] == y.get(k)]
        for k in keys: print(("same " if k in same else "DIFF ") + k, "" if k in same else (x[k], y.get(k)))
        off = lambda r: " (levers off)" if r.get("levers_off") else ""
        print(f"{len(same)}/{len(keys)} checkpoints bit-identical ({x['commit']}{off(x)} vs {y['commit']}{off(y)}, {x['cpu_capability']})")
        sys.exit(0 if len(same) == len(keys) else 1)
    res = run_all(a.levers_off)
    print(json.dumps(res, indent=1))
    if a.out: Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
