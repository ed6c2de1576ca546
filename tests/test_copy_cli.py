"`annotated-transformer train --task copy` end to end: learns to copy exactly, and resumes bit for bit in a new process."
import json, os, subprocess, sys, textwrap
from pathlib import Path
import torch

EXE = str(Path(sys.executable).parent / "annotated-transformer")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def run(*args, **kw):
    return subprocess.run(args, capture_output=True, text=True, env=ENV, timeout=600, **kw)


def load_ckpt(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def test_copy_reaches_exact_match_json():
    r = run(EXE, "train", "--task", "copy", "--seed", "0", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])               # the final line is one JSON object
    assert res["task"] == "copy" and res["steps"] == 1000
    assert res["exact_match"] == 1.0, res
    assert "train" in r.stderr                                         # the progress bar went to stderr


def test_resume_in_new_process_is_bit_for_bit(tmp_path):
    common = ["train", "--task", "copy", "--seed", "3", "--max-train-pairs", "2000", "--batch-tokens", "400"]
    full, part = tmp_path / "full", tmp_path / "part"
    r = run(EXE, *common, "--max-steps", "30", "--checkpoint-dir", str(full))                  # uninterrupted 2k
    assert r.returncode == 0, r.stderr[-2000:]
    r = run(EXE, *common, "--max-steps", "15", "--checkpoint-dir", str(part), "--save-every", "15")  # k, save
    assert r.returncode == 0, r.stderr[-2000:]
    assert (part / "step_00000015.pt").exists()
    r = run(EXE, *common, "--max-steps", "30", "--checkpoint-dir", str(part), "--resume", "--json")  # new process
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["steps"] == 30
    a, b = load_ckpt(full / "step_00000030.pt"), load_ckpt(part / "step_00000030.pt")
    assert a["model"].keys() == b["model"].keys()
    for k in a["model"]: assert torch.equal(a["model"][k], b["model"][k]), k
    assert a["optimizer"]["param_groups"][0]["lr"] == b["optimizer"]["param_groups"][0]["lr"]
    assert a["train_state"] == b["train_state"]


def test_resume_with_dropout_restores_random_state(tmp_path):
    "Dropout draws from the global generator: the checkpoint's random states make a new process continue identically."
    script = textwrap.dedent("""
        import sys, torch
        from annotated_transformer.copy_task import train_copy
        from annotated_transformer.training import latest_checkpoint
        steps, d, resume = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
        train_copy(max_steps=steps, seed=1, n_train=1000, batch_tokens=300, dropout=0.1, checkpoint_dir=d,
                   save_every=10, resume_from=latest_checkpoint(d) if resume else None, progress=False)
    """)
    for args in [("20", tmp_path / "full", "0"), ("10", tmp_path / "part", "0"), ("20", tmp_path / "part", "1")]:
        r = run(sys.executable, "-c", script, *map(str, args))
        assert r.returncode == 0, r.stderr[-2000:]
    a, b = load_ckpt(tmp_path / "full" / "step_00000020.pt"), load_ckpt(tmp_path / "part" / "step_00000020.pt")
    for k in a["model"]: assert torch.equal(a["model"][k], b["model"][k]), k


def test_cli_errors_are_one_line(tmp_path):
    r = run(EXE, "train", "--task", "copy", "--resume")
    assert r.returncode == 1 and "error: --resume needs --checkpoint-dir" in r.stderr
    r = run(EXE, "train", "--task", "copy", "--resume", "--checkpoint-dir", str(tmp_path))
    assert r.returncode == 1 and "no checkpoint" in r.stderr
    r = run(EXE, "train", "--task", "copy", "--max-steps", "2", "--precision", "fp16", "--device", "cpu")
    assert r.returncode == 1 and "needs a CUDA device" in r.stderr
    (tmp_path / "step_00000005.pt").write_bytes(b"garbage" * 10)
    r = run(EXE, "train", "--task", "copy", "--resume", "--checkpoint-dir", str(tmp_path))
    assert r.returncode == 1 and "step_00000005.pt is truncated or corrupt" in r.stderr
