"`annotated-transformer bench --quick --json` runs and prints one JSON object with every ratio (no timing assertions)."
import json, math, os, subprocess, sys
from pathlib import Path

import pytest

from annotated_transformer.benchmarking import RATIO_KEYS, format_report, plot_bench
from annotated_transformer.speed_levers import cpu_peak_memory_supported

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
    assert res["hardware"]["capability"] and res["hardware"]["bf16"] in ("native", "emulated")
    assert res["train_step"].startswith("ours: chapter 11's TrainStep as fit runs it")   # the step timed is the one fit runs
    skipped = res["hardware"]["bf16"] == "emulated"  # this machine's CPU: bf16 is timed only where it is native
    assert (res["bf16_skipped"] is not None) == skipped
    for key in RATIO_KEYS:                    # every ratio a finite number (values only, no thresholds)
        if key == "peak_memory_ratio" and not cpu_peak_memory_supported(): continue   # None off Linux/glibc
        if key.startswith("bf16") and skipped:
            assert res[key] is None, key; continue
        nums = _numbers(res[key])
        assert nums and all(math.isfinite(n) for n in nums), key
    assert all(v > 0 for k in ("train_speedup_vs_nn_transformer", "greedy_cached_speedup", "bf16_speedup") for v in (res[k] or {}).values())
    assert "bench [" in r.stderr               # progress goes to stderr, not stdout


def test_bench_skips_bf16_with_a_reason_where_the_cpu_emulates_it():
    "An emulating CPU, simulated: oneDNN capped below AVX512-BF16, PyTorch's kernels at AVX2 (what the runtime appendix's bf16_native reads)."
    env = {**ENV, "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
    r = subprocess.run([str(EXE), "bench", "--quick", "--json", "--device", "cpu"], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["hardware"]["bf16"] == "emulated" and res["hardware"]["capability"] == "AVX2"
    assert res["bf16_speedup"] is None and res["bf16_matmul_speedup"] is None and res["details"]["bf16"] == {}
    skip = res["bf16_skipped"]
    assert "emulates bf16" in skip["reason"] and "AVX2" in skip["reason"]
    assert math.isfinite(skip["measured_slowdown"]) and skip["measured_slowdown"] > 0   # a measured number, no threshold
    assert f"{skip['measured_slowdown']:.1f}x" in skip["reason"]                          # the reason quotes it
    assert not any(k.startswith("bf16") for k in res["meets_targets"])                    # not judged when not measured
    assert "bf16 section skipped: this CPU (AVX2" in r.stderr                             # said while it runs, too
    assert "bf16 autocast vs fp32" not in r.stderr                                        # and nothing of it was run
    text = format_report(res)                                                             # the text report of the same result
    assert "bf16 autocast: skipped: this CPU (AVX2" in text
    assert "AVX2, bf16 emulated" in text.splitlines()[0]                                  # its first line names the CPU
    import matplotlib; matplotlib.use("Agg")
    for which in ("bf16", "training", "scaling"):                                         # every figure names it too
        ax = plot_bench(res, which)
        assert "AVX2, bf16 emulated" in ax.get_title(), (which, ax.get_title())
    assert "skipped" in plot_bench(res, "bf16").get_title()


def test_bench_bad_device_is_a_clear_error():
    r = subprocess.run([str(EXE), "bench", "--device", "nonsense"], capture_output=True, text=True, timeout=120, env=ENV)
    assert r.returncode == 1 and "annotated-transformer bench: error:" in r.stderr


# a stored full run on an AVX2 CPU: base misses the training target, so `--check` has something to judge
STORED = Path(__file__).parents[1] / "nbs" / "results" / "bench_json_avx2_run5.json"


def test_report_judges_targets_only_with_check():
    res = json.loads(STORED.read_text())
    plain = format_report(res)                                  # what a user sees: figures and their references
    assert "nn.Transformer's tokens/s" in plain
    assert not any(w in plain for w in ("target", "MISSES", "meets")), plain
    judged = format_report(res, check=True)                     # the project's own check
    assert "MISSES" in judged and "meets" in judged and "target ≥" in judged


def test_bench_check_exit_status(monkeypatch, capsys):
    "`bench` exits 0 whatever the figures; `bench --check` exits 1 when a target is missed, and names it."
    from annotated_transformer import cli, cli_lab
    res = json.loads(STORED.read_text())
    monkeypatch.setattr(cli_lab, "run_benchmarks", lambda **kw: res)     # the stored run instead of minutes of timing
    assert cli.main(["bench"]) == 0
    assert "MISSES" not in capsys.readouterr().out
    assert cli.main(["bench", "--check"]) == 1
    out = capsys.readouterr()
    assert "MISSES" in out.out and "missed train_speedup_vs_nn_transformer[base]" in out.err
    met = {**res, "meets_targets": {k: True for k in res["meets_targets"]}}
    monkeypatch.setattr(cli_lab, "run_benchmarks", lambda **kw: met)
    assert cli.main(["bench", "--check", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["meets_targets"]


@pytest.mark.parametrize("flag", ["--quick", "--translate"])
def test_bench_check_is_for_a_full_training_run(flag, capsys):
    from annotated_transformer import cli
    with pytest.raises(SystemExit) as e: cli.main(["bench", "--check", flag])
    assert e.value.code == 2 and "--check judges a full run" in capsys.readouterr().err
