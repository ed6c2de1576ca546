"""Importing a module of the package changes nothing outside it: no environment variable, no global torch setting, no
signal handler, no warnings filter, no random state. Anything of that kind happens in an explicit call (for example
`fast_model.enlarge_onednn_cache`, which the command line calls first thing)."""
import json, subprocess, sys

PROBE = r'''
import importlib, json, os, pkgutil, signal, sys, warnings
import numpy, torch, matplotlib, tqdm, sacrebleu, safetensors, fastcore, tokenizers   # their own effects: before
def snap():
    return {"environ": dict(os.environ), "torch threads": torch.get_num_threads(),
            "interop threads": torch.get_num_interop_threads(), "default dtype": str(torch.get_default_dtype()),
            "grad enabled": torch.is_grad_enabled(), "deterministic": torch.are_deterministic_algorithms_enabled(),
            "mkldnn enabled": torch.backends.mkldnn.enabled, "matmul precision": torch.get_float32_matmul_precision(),
            "cudnn benchmark": torch.backends.cudnn.benchmark, "SIGINT": str(signal.getsignal(signal.SIGINT)),
            "SIGTERM": str(signal.getsignal(signal.SIGTERM)), "warnings filters": [str(f) for f in warnings.filters],
            "torch rng": torch.random.get_rng_state().tolist()[:64], "numpy rng": str(numpy.random.get_state()[1][:8]),
            "cwd": os.getcwd(), "matplotlib backend": matplotlib.get_backend(),
            "stdout": repr(sys.stdout), "recursion limit": sys.getrecursionlimit()}
before = snap()
import annotated_transformer
names = sorted(m.name for m in pkgutil.iter_modules(annotated_transformer.__path__) if m.name != "__main__")
for name in names: importlib.import_module("annotated_transformer." + name)
after = snap()
print(json.dumps({"modules": names, "changed": {k: [before[k], after[k]] for k in before if before[k] != after[k]}}))
'''


def test_importing_every_module_changes_nothing_outside_it():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert {"model", "fast_model", "fast_decoding", "decoding", "cli", "benchmarking"} <= set(res["modules"])
    changed = res["changed"]
    if "environ" in changed:   # name the variables, not the whole environment
        old, new = changed.pop("environ")
        changed["environ"] = {k: [old.get(k), new.get(k)] for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
    assert not changed, f"importing the package changed: {changed}"


def test_the_probe_sees_a_change():
    "The check itself: a module-level `os.environ.setdefault` (what the decoding chapter once did) is caught."
    probe = PROBE.replace("for name in names: importlib.import_module",
                          "os.environ.setdefault('ONEDNN_PRIMITIVE_CACHE_CAPACITY', '16384')\n"
                          "for name in names: importlib.import_module")
    env = {k: v for k, v in __import__("os").environ.items() if k != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, env=env)
    assert "environ" in json.loads(out.stdout.strip().splitlines()[-1])["changed"]
