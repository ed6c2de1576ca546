"""Stopping a training run loses nothing (issue 11): SIGTERM or SIGINT between checkpoints saves the update in progress,
the message names the checkpoint and the exact command that continues, and that command ends bit for bit where an
uninterrupted run ends. Under torchrun, a signal to one rank stops every rank at the same update, and an error is
printed once (by rank 0) while every rank exits non-zero.

Everything runs the real console script (or torchrun) in subprocesses: signals, exit statuses and streams are the point.
"""
import json, os, re, shlex, signal, subprocess, sys, time
from pathlib import Path

import torch
from cli_run import messages

BIN = Path(sys.executable).parent
EXE = str(BIN / "annotated-transformer")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
STEPS = 100                                              # ~20-30 updates/s on one core: the signal lands far from the end
ARGS = ["train", "--task", "copy", "--max-steps", str(STEPS), "--save-every", "1000", "--max-train-pairs", "500", "--seed", "0"]


def _default_sigint():
    "In the child: SIGINT at its default, so Python turns it into KeyboardInterrupt even if pytest runs in the background."
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(argv, err_path, **kw):
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(err_path, "w"), env=ENV,
                            preexec_fn=_default_sigint, **kw)


def updates_done(err_path: Path, total: int = STEPS) -> int:
    "The latest count of the progress bar (`train:  12%|█▏ | 18/150 [...]`) in a stderr file, 0 before the first."
    counts = re.findall(rf"(\d+)/{total}\b", err_path.read_text(errors="replace"))
    return int(counts[-1]) if counts else 0


def signal_when_training(runs, at_least=5, timeout=180, total=STEPS):
    "Send each (process, stderr file, signal) its signal as soon as its progress bar shows `at_least` updates."
    pending, deadline = list(runs), time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for run in list(pending):
            proc, err_path, sig = run
            assert proc.poll() is None, f"the run ended before the signal:\n{err_path.read_text()[-2000:]}"
            if updates_done(err_path, total) >= at_least: proc.send_signal(sig); pending.remove(run)
        time.sleep(0.02)
    assert not pending, f"no progress after {timeout} s:\n{pending[0][1].read_text()[-2000:]}"


def load(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def assert_same_checkpoint(a_path, b_path):
    "Bit for bit: weights, optimizer state, schedule, train state (loss history included), random states."
    a, b = load(a_path), load(b_path)
    assert a["model"].keys() == b["model"].keys()
    for k in a["model"]: assert torch.equal(a["model"][k], b["model"][k]), k
    assert a["optimizer"]["param_groups"] == b["optimizer"]["param_groups"]
    assert a["optimizer"]["state"].keys() == b["optimizer"]["state"].keys()
    for i, sa in a["optimizer"]["state"].items():
        sb = b["optimizer"]["state"][i]
        assert sa.keys() == sb.keys() and all(torch.equal(sa[x], sb[x]) for x in sa), i
    assert a["scheduler"] == b["scheduler"]
    assert a["train_state"] == b["train_state"]
    assert a["train_state"]["train_loss"] and a["train_state"]["step"] == STEPS


def test_signal_between_checkpoints_then_resume_is_bit_for_bit(tmp_path):
    "SIGTERM and SIGINT mid-run (no checkpoint due before the end): saved, one message, and its command ends bit for bit."
    ref_dir = tmp_path / "ref"
    ref = start([EXE, *ARGS, "--checkpoint-dir", str(ref_dir)], tmp_path / "ref.err")              # uninterrupted
    victims = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        d, err = tmp_path / sig.name, tmp_path / f"{sig.name}.err"
        victims[sig] = (d, err, start([EXE, *ARGS, "--checkpoint-dir", str(d)], err))
    no_dir = [a for a in ARGS if a not in ("--save-every", "1000")]                   # nowhere to save
    bare = start([EXE, *no_dir], tmp_path / "bare.err")
    signal_when_training([(p, err, sig) for sig, (d, err, p) in victims.items()]   # clearly training, far from the end
                         + [(bare, tmp_path / "bare.err", signal.SIGTERM)])

    assert bare.wait(timeout=120) == 143
    msg = messages((tmp_path / "bare.err").read_text())
    assert len(msg) == 1 and re.fullmatch(r"annotated-transformer train: stopped by SIGTERM after update \d+; nothing was "
                                          r"saved \(no --checkpoint-dir\)\. To make a run resumable, .*--checkpoint-dir DIR.*"
                                          r"--resume continues it", msg[0]), msg
    resumed = {}
    for sig, (d, err, p) in victims.items():
        rc = p.wait(timeout=120)
        text = err.read_text()
        assert rc == 128 + sig, (rc, text[-2000:])                    # 143 for SIGTERM, 130 for SIGINT
        assert "Traceback" not in text, text[-2000:]
        msg = messages(text)
        assert len(msg) == 2, msg                                     # one message: what happened, then the command
        m = re.fullmatch(rf"annotated-transformer train: stopped by {sig.name} after update (\d+); "
                         rf"saved checkpoint (\S+)\. Continue with:", msg[0])
        assert m, msg[0]
        k, ckpt = int(m.group(1)), Path(m.group(2))
        assert 0 < k < STEPS and ckpt == d / f"step_{k:08d}.pt", msg[0]
        assert sorted(p.name for p in d.iterdir()) == [ckpt.name]      # saved atomically: no temporary file left
        assert load(ckpt)["train_state"]["step"] == k
        command = shlex.split(msg[1])
        assert command[1:] == [*ARGS, "--checkpoint-dir", str(d), "--resume"], msg[1]
        assert command[0] in ("annotated-transformer", EXE), msg[1]
        resumed[sig] = (k, ckpt, subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV))
    assert ref.wait(timeout=300) == 0, (tmp_path / "ref.err").read_text()[-2000:]
    for sig, (k, ckpt, p) in resumed.items():
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        assert messages(err)[0] == f"resumed from step {k} ({ckpt})", err[:1000]
        assert re.search(rf"\b{k}/{STEPS}\b", err)                  # the bar starts at the interrupted update
        assert_same_checkpoint(ref_dir / f"step_{STEPS:08d}.pt", victims[sig][0] / f"step_{STEPS:08d}.pt")


def torchrun(*args):
    return [str(BIN / "torchrun"), "--standalone", "--nproc_per_node=2", "-m", "annotated_transformer", *map(str, args)]


def test_error_under_torchrun_is_printed_once(tmp_path):
    "An error that both ranks meet at the same moment (after joining the process group): one line, from rank 0."
    # (an error before the rendezvous, such as --resume without --checkpoint-dir, is a race: torchrun may kill the
    # slower rank before it gets there, so that even a program printing on every rank would often print once)
    r = subprocess.run(torchrun("train", "--task", "copy", "--precision", "fp16", "--device", "cpu", "--max-steps", 2),
                       capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode != 0
    errors = [l for l in r.stderr.splitlines() if "annotated-transformer train: error:" in l]
    assert len(errors) == 1 and "precision='fp16' needs a CUDA device" in errors[0], r.stderr[-3000:]


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def rank_of(pid: int) -> int|None:
    env = dict(kv.split("=", 1) for kv in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in kv)
    return int(env["RANK"]) if "RANK" in env else None


def test_signal_to_one_rank_stops_every_rank_at_the_same_update(tmp_path):
    "SIGTERM to rank 1 only: the stop travels in the per-update all-reduce, rank 0 saves that update and prints once."
    d, err = tmp_path / "ck", tmp_path / "err"
    steps = 400
    argv = ["train", "--task", "copy", "--max-steps", steps, "--max-train-pairs", 1000, "--checkpoint-dir", d, "--seed", 0]
    p = start(torchrun(*argv), err)
    deadline = time.monotonic() + 180
    while p.poll() is None and updates_done(err, steps) < 5 and time.monotonic() < deadline: time.sleep(0.02)
    assert p.poll() is None and updates_done(err, steps) >= 5, err.read_text()[-2000:]
    workers = {rank_of(c): c for c in children(p.pid)}
    assert set(workers) == {0, 1}, workers
    os.kill(workers[1], signal.SIGTERM)
    assert p.wait(timeout=120) != 0
    text = err.read_text()
    stops = [l for l in messages(text) if "stopped by" in l]
    assert len(stops) == 1, text[-3000:]                              # rank 0 only
    m = re.fullmatch(r"annotated-transformer train: stopped by SIGTERM after update (\d+); saved checkpoint (\S+)\. "
                     r"Continue with:", stops[0])
    assert m, stops[0]
    k = int(m.group(1))
    assert 0 < k < steps and [c.name for c in d.iterdir()] == [f"step_{k:08d}.pt"], (k, list(d.iterdir()))
    ck = load(d / f"step_{k:08d}.pt")
    assert ck["train_state"]["step"] == k and len(ck["rng"]) == 2      # both ranks' random states: both were at update k
    resume = next(l for l in messages(text) if "--resume" in l)
    assert shlex.split(resume)[1:] == ["--standalone", "--nproc_per_node=2", "-m", "annotated_transformer",
                                       *map(str, argv), "--resume"], resume


_AVERAGING_RUN = r'''
import json, os, signal, sys, threading, time, io, contextlib
from annotated_transformer.cli import main
from annotated_transformer.data import SAMPLE_DIR
d, stop_when, *extra = sys.argv[1:]
if stop_when != "-":                                   # SIGTERM to ourselves once that checkpoint exists
    def watch():
        while not os.path.exists(os.path.join(d, stop_when)): time.sleep(0.002)
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=watch, daemon=True).start()
args = ["train", "--data-dir", str(SAMPLE_DIR), "--recipe", "tiny", "--max-train-pairs", "200", "--max-steps", "10",
        "--save-every", "2", "--beam-size", "1", "--json", "--checkpoint-dir", d, *extra]
sys.exit(main(args))
'''


def test_interrupt_checkpoint_is_not_averaged(tmp_path):
    "An interrupt's off-schedule checkpoint serves --resume only: the §6.1 average is the uninterrupted run's."
    run = lambda d, stop, *extra: subprocess.run([sys.executable, "-c", _AVERAGING_RUN, str(d), stop, *extra],
                                                 capture_output=True, text=True, timeout=600,
                                                 env={**os.environ, "OMP_NUM_THREADS": "1"})
    a, b = tmp_path / "a", tmp_path / "b"
    ra = run(a, "-"); assert ra.returncode == 0, ra.stderr[-2000:]
    rb = run(b, "step_00000004.pt"); assert rb.returncode == 143, rb.stderr[-2000:]
    off = [p.name for p in b.glob("step_*.pt") if int(p.stem.split("_")[1]) % 2]
    assert off, f"the interrupt saved no off-schedule checkpoint: {sorted(p.name for p in b.iterdir())}"
    rc = run(b, "-", "--resume"); assert rc.returncode == 0, rc.stderr[-2000:]
    res_a, res_b = json.loads(ra.stdout.strip().splitlines()[-1]), json.loads(rc.stdout.strip().splitlines()[-1])
    assert res_a["averaged"] == res_b["averaged"] == [f"step_{s:08d}.pt" for s in (2, 4, 6, 8, 10)], (res_a, res_b)
    wa, wb = load(a / "averaged.pt")["model"], load(b / "averaged.pt")["model"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_copy_refuses_a_directory_holding_another_run(tmp_path):
    "A fresh run never writes beside another run's checkpoints (whose --resume would then pick the wrong one)."
    args = [EXE, "train", "--task", "copy", "--max-steps", "2", "--max-train-pairs", "200", "--checkpoint-dir", str(tmp_path)]
    first = subprocess.run(args, capture_output=True, text=True, env=ENV, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    again = subprocess.run([*args, "--seed", "5"], capture_output=True, text=True, env=ENV, timeout=300)
    assert again.returncode == 1 and "already holds checkpoints of a run (latest step_00000002.pt)" in again.stderr, again.stderr
    assert sorted(p.name for p in tmp_path.glob("step_*.pt")) == ["step_00000002.pt"]
