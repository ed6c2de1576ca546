"`annotated-transformer bench --quick --json` runs and prints one JSON object with every ratio (no timing assertions)."
import json, math, os, subprocess, sys
from pathlib import Path

from annotated_transformer.performance import RATIO_KEYS, cpu_peak_memory_supported

EXE = Path(sys.executable).parent / "annotated-transformer"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}  # a smoke test: one thread keeps it quick on a busy machine


def _numbers(x):
    "Every number inside a nested dict/list."
    if isinstance(x, dict): return [n for v in x.values() for n in _numbers(v)]
    if isinstance(x, (list, tuple)): return [n for v in x for n in _numbers(v)]
    return [x] if isinstance(x, (int, float)) and not isinstance(x, bool) else []


def test_bench_quick_json_has_every_ratio():
    r = subprocess.run([str(EXE), "bench", "--quick", "--json", "--device", "cpu"], capture_output=True, text=True, timeout=600, env=ENV)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1, f"stdout must hold exactly one JSON line, got {len(lines)}"
    res = json.loads(lines[0])
    missing = [k for k in RATIO_KEYS if k not in res]
    assert not missing, f"missing ratio keys: {missing}"
    assert res["quick"] is True
    assert set(res["train_speedup_vs_nn_transformer"]) == {"small", "base"}
    assert set(res["greedy_cached_speedup"]) == {"16", "32", "64", "128"}
    for key in RATIO_KEYS:                    # every ratio a finite number (values only, no thresholds)
        if key == "peak_memory_ratio" and not cpu_peak_memory_supported(): continue   # None off Linux/glibc
        nums = _numbers(res[key])
        assert nums and all(math.isfinite(n) for n in nums), key
    assert all(v > 0 for k in ("train_speedup_vs_nn_transformer", "greedy_cached_speedup", "bf16_speedup") for v in res[k].values())
    assert "bench [" in r.stderr               # progress goes to stderr, not stdout


def test_bench_bad_device_is_a_clear_error():
    r = subprocess.run([str(EXE), "bench", "--device", "nonsense"], capture_output=True, text=True, timeout=120, env=ENV)
    assert r.returncode == 1 and "annotated-transformer bench: error:" in r.stderr
