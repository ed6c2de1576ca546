"""tools/gpu_check.sh, the GPU check, rehearsed on the CPU: `--dry-run` runs every step with tiny sizes in under two
minutes and writes one JSON; a step that fails is recorded and the exit status says so; without a data root the
script stops at once, naming $ANNOTATED_TRANSFORMER_DATA. The dry run reads Multi30k from the data root: without one
it is skipped, saying why (under CI=true, tests/conftest.py refuses to run without one)."""
import json, math, os, subprocess, sys, time
from pathlib import Path
import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "tools" / "gpu_check.sh"
DATA_ENV = "ANNOTATED_TRANSFORMER_DATA"
STEPS = ("probe", "install", "train_multi30k", "evaluate_val", "train_bf16", "train_fp16", "torchrun_cli",
         "torchrun_ddp", "bench", "bench_translate", "translate", "translate_ctranslate2")
# the steps a CPU may skip, each with (a part of) its reason
MAY_SKIP = {"install": "already imports from this tree", "train_fp16": "needs a CUDA device",
            "bench_translate": "has no device"}
LIMIT_S = 120   # the dry run's promise: under two minutes on two cores


def data_root() -> str:
    "The data root holding Multi30k; without one, skip saying why."
    root = os.environ.get(DATA_ENV)
    if not root:
        pytest.skip(f"${DATA_ENV} is not set, so Multi30k is not available "
                    f"(set it to a data root holding multi30k/ to run the GPU check's dry run)")
    if not (Path(root) / "multi30k" / "train.de.gz").exists():
        pytest.fail(f"${DATA_ENV}={root} holds no multi30k/train.de.gz", pytrace=False)
    return root


def gpu_check(*args, **env) -> subprocess.CompletedProcess:
    "Run tools/gpu_check.sh with this interpreter and this tree's package (so it installs nothing)."
    e = {**os.environ, "PYTHON": sys.executable,
         "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    e.update(env)
    e = {k: v for k, v in e.items() if v is not None}
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], capture_output=True, text=True, env=e, timeout=300)


def test_dry_run_runs_every_step_in_under_two_minutes(tmp_path):
    root = data_root()
    t = time.monotonic()
    r = gpu_check("--dry-run", tmp_path, **{DATA_ENV: root})
    wall = time.monotonic() - t
    assert r.returncode == 0, r.stderr[-3000:]
    assert [p.name for p in tmp_path.iterdir()] == ["gpu_check_dryrun.json"]       # one JSON, no temporary file
    res = json.loads((tmp_path / "gpu_check_dryrun.json").read_text())
    for key in ("command", "date", "git", "nvidia_smi", "torch", "cuda", "python", "data_root", "sizes"):
        assert key in res, key
    import torch
    assert res["mode"] == "dry-run" and res["torch"] == torch.__version__ and res["sizes"]["device"] == "cpu"
    assert res["complete"] and res["failed"] == []
    assert res["wall_s"] < LIMIT_S and wall < LIMIT_S, (res["wall_s"], wall)
    steps = res["steps"]
    assert tuple(steps) == STEPS
    for name, s in steps.items():
        if s["status"] == "skipped":
            assert name in MAY_SKIP and MAY_SKIP[name] in s["reason"], (name, s)
        else:
            assert s["status"] == "ok", (name, s)
            assert s["exit_status"] == (143 if name == "train_multi30k" else 0), (name, s)
            assert s["command"] and s["wall_s"] > 0, (name, s)
    # what each step read from its output
    train = steps["train_multi30k"]
    assert train["stopped_at_cap"] and train["updates"] > 0 and train["tokens_per_s"] > 0
    assert train["checkpoint"].endswith(f"step_{train['updates']:08d}.pt")
    ev = steps["evaluate_val"]
    assert ev["split"] == "val" and ev["sentences"] == res["sizes"]["val_sentences"] and ev["bleu"] >= 0
    bf16 = steps["train_bf16"]
    assert bf16["precision"] == "bf16" and math.isfinite(bf16["train_loss"]) and bf16["tokens_per_s"] > 0
    assert steps["torchrun_cli"]["result"]["world_size"] == 1
    ddp = steps["torchrun_ddp"]["result"]
    assert ddp["backend"] == "gloo" and ddp["all_reduce_ok"] and ddp["replicas_in_sync"] and ddp["finite"]
    assert steps["bench"]["result"]["quick"] and steps["bench"]["meets_targets"]
    tr = steps["translate"]
    assert tr["translated"] == tr["sentences"] == res["sizes"]["translate_sentences"] and tr["sentences_per_s"] > 0
    ct2 = steps["translate_ctranslate2"]                          # the deploy engine, one flag away
    assert ct2["translated"] == ct2["sentences"] and "engine ctranslate2 int8" in ct2["engine_line"]
    assert ct2["decode_sentences_per_s"] > 0


def test_a_step_that_fails_is_recorded_and_the_exit_status_says_so(tmp_path):
    "A budget of 5 s leaves no step its 10 s: each is recorded as failed, not run, and the script exits 1."
    r = gpu_check("--dry-run", "--budget", 5, tmp_path, **{DATA_ENV: data_root()})
    assert r.returncode == 1, r.stderr[-3000:]
    res = json.loads((tmp_path / "gpu_check_dryrun.json").read_text())
    assert res["complete"] and "probe" in res["failed"] and "translate" in res["failed"]
    assert "out of the time budget" in res["steps"]["translate"]["reason"]
    assert "FAILED: probe" in r.stderr


@pytest.mark.parametrize("root", [None, "no-multi30k-here"])
def test_without_a_data_root_it_stops_at_once_naming_the_variable(tmp_path, root):
    r = gpu_check("--dry-run", tmp_path, **{DATA_ENV: None if root is None else str(tmp_path / root)})
    assert r.returncode == 2 and DATA_ENV in r.stderr and "multi30k" in r.stderr, r.stderr
    assert not list(tmp_path.glob("*.json"))
