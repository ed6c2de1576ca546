"""Faults and bad input across the product (issue 8): nothing lost, nothing unexplained.

1. a training run killed with SIGKILL resumes from its last checkpoint (saying so, and removing the temporary file
   of a save the kill cut short) and ends bit for bit where an uninterrupted run ends (SIGTERM and SIGINT, which
   save the update in progress first: tests/test_interrupt.py); 2. failed checkpoint writes leave the previous checkpoint intact and no temporary
   files; 3. bad checkpoints are refused by name and never execute code; 4. odd `translate` input;
5. bad data files; 7. CLI hygiene: usage errors exit 2, runtime errors exit 1 with one line on stderr, stdout
   holds only results (`--json`: one JSON object). Point 6 (numerics) is tests/test_numerics.py, extended at the end.

Command-line checks run the real console script in a subprocess where the process matters (exit status, streams,
SIGKILL); the many variations of one error run `cli.main` in process, which is the same code without the
3-second start of a new Python with torch.
"""
import errno, gzip, json, os, pickle, random, re, signal, subprocess, sys, time
from pathlib import Path

import pytest
import torch

import annotated_transformer.checkpoints as checkpoints
from annotated_transformer.data import (read_lines, read_parallel, load_split, ensure_splits, resolve_data_dir,
                                        build_codec, DATA_ENV)
from annotated_transformer.embeddings import UNK_IDX, PAD_IDX
from annotated_transformer.model import create_transformer
from annotated_transformer.fast_model import make_fast, ModelLevers
from annotated_transformer.training import TrainState
from annotated_transformer.checkpoints import (save_checkpoint, load_checkpoint, model_from_checkpoint, restore_checkpoint, list_checkpoints)
from cli_run import run_main

torch.set_num_threads(1)
EXE = str(Path(sys.executable).parent / "annotated-transformer")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def cli(*args, input=None, timeout=300):
    "Run the console script; returns the CompletedProcess (stdout/stderr as text unless `input` is bytes)."
    text = not isinstance(input, bytes)
    r = subprocess.run([EXE, *map(str, args)], input=input, capture_output=True, text=text, env=ENV, timeout=timeout)
    if not text: r.stdout, r.stderr = r.stdout.decode(), r.stderr.decode()
    return r


PROGRESS = re.compile(r"^\s*(train|decoding)\b.*\|")                     # tqdm bars: "train:  50%|█████ | 1/2 [...]"


def strip_progress(err: str) -> str:
    "stderr without progress bars (each bar line is rewritten in place with \\r)."
    lines = (l.rsplit("\r", 1)[-1] for l in err.split("\n"))
    return "\n".join(l for l in lines if l.strip() and not PROGRESS.match(l))


def assert_one_line_error(rc, out, err, *needles):
    "Exit status 1, nothing on stdout, exactly one line on stderr besides progress bars, with every needle; no traceback."
    assert rc == 1, (rc, out, err)
    assert out == "", out
    assert "Traceback" not in err, err
    lines = strip_progress(err).splitlines()
    assert len(lines) == 1 and lines[0].startswith("annotated-transformer ") and ": error: " in lines[0], err
    for n in needles: assert str(n) in lines[0], (n, lines[0])


def assert_usage_error(rc, out, err, *needles):
    "A usage error: exit status 2, one line on stderr naming the command and the flag (no usage block), nothing on stdout."
    assert rc == 2, (rc, out, err)
    assert out == "", out
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("annotated-transformer") and ": error: " in lines[0], err
    assert "usage:" not in err and "Traceback" not in err, err
    for n in needles: assert n in err, (n, err)


def tiny_model(**kw):
    torch.manual_seed(0)
    return create_transformer(14, 14, "tiny", **kw)


# --------------------------------------------------------------------------------------------------------------
# 1. kill -9 mid-training, then --resume
# --------------------------------------------------------------------------------------------------------------

COPY = ["train", "--task", "copy", "--seed", "1", "--max-train-pairs", "1000", "--batch-tokens", "300"]
STEPS, EVERY = 100, 10
TMP_RE = re.compile(r"\.step_\d{8}\.pt\..+\.tmp")                      # save_checkpoint's temporary files


def test_sigkill_mid_training_then_resume_is_bit_for_bit(tmp_path):
    full, part = tmp_path / "full", tmp_path / "part"
    common = [*COPY, "--max-steps", STEPS, "--save-every", EVERY]
    with open(tmp_path / "full.err", "w") as ferr:                     # the uninterrupted run, alongside
        ref = subprocess.Popen([EXE, *map(str, common), "--checkpoint-dir", str(full)], stdout=subprocess.DEVNULL,
                               stderr=ferr, env=ENV)
        with open(tmp_path / "killed.err", "w") as kerr:
            victim = subprocess.Popen([EXE, *map(str, common), "--checkpoint-dir", str(part)],
                                      stdout=subprocess.DEVNULL, stderr=kerr, env=ENV)
            deadline = time.monotonic() + 120
            while victim.poll() is None and not list_checkpoints(part) and time.monotonic() < deadline: time.sleep(0.01)
            time.sleep(0.1)                                             # a few updates into the next interval
            victim.send_signal(signal.SIGKILL)
            victim.wait()
        ref_rc = ref.wait(timeout=300)
    assert ref_rc == 0, (tmp_path / "full.err").read_text()[-2000:]
    assert victim.returncode == -signal.SIGKILL, f"the run ended by itself before the kill: raise STEPS\n" + \
        (tmp_path / "killed.err").read_text()[-1000:]

    # What the kill left: whole checkpoints every EVERY updates up to the last one (k < STEPS), at most a temporary file.
    cps = list_checkpoints(part)
    assert cps, "killed before its first checkpoint"
    k = int(cps[-1].stem.split("_")[1])
    assert EVERY <= k < STEPS, f"killed after update {k}: raise STEPS so that the kill lands mid-training"
    assert [p.name for p in cps] == [f"step_{s:08d}.pt" for s in range(EVERY, k + 1, EVERY)]
    for p in cps: assert load_checkpoint(p)["train_state"]["step"] == int(p.stem.split("_")[1])
    others = {p.name for p in part.iterdir()} - {p.name for p in cps}
    assert all(TMP_RE.fullmatch(n) for n in others), others              # killed inside a save: only its temp file

    # Resume in a new process: it starts at update k (the progress bar's first count), so at most the updates
    # since the last save (< EVERY, or EVERY if killed while writing a save) are redone.
    r = cli(*common, "--checkpoint-dir", part, "--resume", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    first = re.search(rf"(\d+)/{STEPS}\b", r.stderr)
    assert first and int(first.group(1)) == k, r.stderr[:500]
    assert f"resumed from step {k} ({cps[-1]})" in r.stderr, r.stderr[:500]
    assert not [n for n in os.listdir(part) if TMP_RE.fullmatch(n)]        # the resume removed the kill's leftovers...
    if others: assert f"removed {len(others)} leftover temporary file" in r.stderr, r.stderr[:500]   # ...and said so
    lines = r.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["steps"] == STEPS      # --json: stdout is one JSON object

    a, b = load_checkpoint(full / f"step_{STEPS:08d}.pt"), load_checkpoint(part / f"step_{STEPS:08d}.pt")
    assert a["model"].keys() == b["model"].keys()
    for name in a["model"]: assert torch.equal(a["model"][name], b["model"][name]), name
    for sa, sb in zip(a["optimizer"]["state"].values(), b["optimizer"]["state"].values()):
        assert all(torch.equal(sa[x], sb[x]) for x in sa)
    assert a["train_state"] == b["train_state"]                            # same steps, tokens, loss history


# --------------------------------------------------------------------------------------------------------------
# 2. checkpoint writes that fail
# --------------------------------------------------------------------------------------------------------------

def enospc(*a, **k): raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class FullDisk:
    "A file whose writes fail with ENOSPC after `room` bytes — what a real full disk does to torch.save."
    def __init__(self, f, room): self.f, self.room = f, room
    def write(self, b):
        if len(b) > self.room: raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(b); return self.f.write(b)
    def __enter__(self): return self
    def __exit__(self, *exc): self.f.close()
    def __getattr__(self, name): return getattr(self.f, name)


@pytest.fixture
def previous(tmp_path):
    "A checkpoint directory holding one good checkpoint (step 1): (model, path, its bytes)."
    m = tiny_model()
    p = save_checkpoint(tmp_path / "ck" / "step.pt", m, train_state=TrainState(step=1))
    return m, p, p.read_bytes()


def assert_previous_intact(p, data):
    assert p.read_bytes() == data                                        # not touched
    assert load_checkpoint(p)["train_state"]["step"] == 1                # and loadable
    assert [q.name for q in p.parent.iterdir()] == [p.name]              # no temporary file left behind


def _partial_then_enospc(obj, f, *a, **k):
    f.write(b"\0" * 4096); enospc()


@pytest.mark.parametrize("where", ["torch.save", "fsync", "os.replace", "full disk"])
def test_failed_write_keeps_previous_checkpoint(previous, monkeypatch, where):
    m, p, data = previous
    if where == "torch.save": monkeypatch.setattr(checkpoints.torch, "save", _partial_then_enospc)
    elif where == "fsync": monkeypatch.setattr(checkpoints.os, "fsync", enospc)
    elif where == "os.replace": monkeypatch.setattr(checkpoints.os, "replace", enospc)
    else:
        real = os.fdopen
        monkeypatch.setattr(checkpoints.os, "fdopen", lambda fd, mode: FullDisk(real(fd, mode), 200_000))
    with pytest.raises((OSError, RuntimeError)):       # a full disk surfaces from torch's writer as a RuntimeError
        save_checkpoint(p, m, train_state=TrainState(step=2))
    monkeypatch.undo()
    assert_previous_intact(p, data)


@pytest.mark.parametrize("where", ["torch.save", "full disk", "parent is a file"])
def test_failed_write_error_names_the_checkpoint(tmp_path, monkeypatch, where):
    m = tiny_model()
    target = tmp_path / "ck" / "step_00000002.pt"
    if where == "torch.save": monkeypatch.setattr(checkpoints.torch, "save", _partial_then_enospc)
    elif where == "full disk":
        real = os.fdopen
        monkeypatch.setattr(checkpoints.os, "fdopen", lambda fd, mode: FullDisk(real(fd, mode), 200_000))
    else:
        (tmp_path / "ck").write_text("a file, not a directory")
    with pytest.raises(OSError) as e: save_checkpoint(target, m)
    msg = str(e.value)
    assert str(target) in msg, msg
    assert ("No space left on device" if where != "parent is a file" else "not a directory") in msg, msg


def test_unwritable_checkpoint_dir(tmp_path):
    "Tests run as root, so chmod cannot stop a write: a path under a *file* can never be written."
    m = tiny_model()
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OSError, match=re.escape(str(tmp_path / "afile"))):
        save_checkpoint(tmp_path / "afile" / "sub" / "step.pt", m)
    with pytest.raises(OSError, match=re.escape(str(tmp_path / "afile"))):
        save_checkpoint(tmp_path / "afile" / "step.pt", m)
    assert (tmp_path / "afile").read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_cli_train_with_unwritable_checkpoint_dir(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    d = tmp_path / "afile" / "runs"
    rc, out, err = run_main(capsys, *COPY, "--max-steps", 2, "--save-every", 1, "--checkpoint-dir", d)
    assert_one_line_error(rc, out, err, d)


def test_disk_full_during_training_then_resume(tmp_path, capsys, monkeypatch):
    "Saves at 2 and 4 succeed, the save at 6 hits a full disk: exit 1, one line; resuming continues from step 4."
    d = tmp_path / "run"
    real, calls = torch.save, []
    def save(obj, f, *a, **k):
        calls.append(1)
        if len(calls) == 3: return _partial_then_enospc(obj, f)
        return real(obj, f, *a, **k)
    monkeypatch.setattr(checkpoints.torch, "save", save)
    rc, out, err = run_main(capsys, *COPY, "--max-steps", 8, "--save-every", 2, "--checkpoint-dir", d)
    monkeypatch.undo()
    assert_one_line_error(rc, out, err, "No space left on device")
    assert sorted(p.name for p in d.iterdir()) == ["step_00000002.pt", "step_00000004.pt"]
    assert load_checkpoint(d / "step_00000004.pt")["train_state"]["step"] == 4
    rc, out, err = run_main(capsys, *COPY, "--max-steps", 8, "--save-every", 2, "--checkpoint-dir", d, "--resume", "--json")
    assert rc == 0 and json.loads(out)["steps"] == 8, err[-1000:]


def test_resume_removes_leftovers_of_a_killed_save(tmp_path, capsys):
    "A kill mid-save leaves `.step_*.pt.*.tmp` (or `.averaged.pt.*.tmp`): the next run in that folder removes them, says so."
    d = tmp_path / "run"
    rc, out, err = run_main(capsys, *COPY, "--max-steps", 2, "--checkpoint-dir", d)
    assert rc == 0, err
    junk = [d / ".step_00000004.pt.k2j4x9a1.tmp", d / ".averaged.pt.a1b2c3d4.tmp"]
    for p in junk: p.write_bytes(b"half a checkpoint")
    (d / "notes.tmp").write_text("not ours")
    rc, out, err = run_main(capsys, *COPY, "--max-steps", 4, "--checkpoint-dir", d, "--resume")
    assert rc == 0, err
    assert not any(p.exists() for p in junk) and (d / "notes.tmp").read_text() == "not ours"
    assert strip_progress(err).splitlines() == [
        f"resumed from step 2 ({d / 'step_00000002.pt'})",
        f"removed 2 leftover temporary files of an interrupted save from {d}: .averaged.pt.a1b2c3d4.tmp, "
        f".step_00000004.pt.k2j4x9a1.tmp"], err


# --------------------------------------------------------------------------------------------------------------
# 3. bad checkpoints
# --------------------------------------------------------------------------------------------------------------

class Evil:
    "Unpickling this runs os.system: it must never happen."
    def __init__(self, marker): self.marker = str(marker)
    def __reduce__(self): return (os.system, (f"touch {self.marker}",))


@pytest.fixture(scope="module")
def mt_ckpt(tmp_path_factory):
    """A translation checkpoint made with the API: a word vocabulary from a few sentences (so real words are UNK)
    and an untrained tiny model whose positional table holds only 20 positions (so long input is cut)."""
    pairs = [("Ein Hund läuft im Park.", "A dog runs in the park."),
             ("Zwei Männer spielen Fußball.", "Two men play soccer."),
             ("Eine Frau liest ein Buch.", "A woman reads a book."),
             ("Ein Kind spielt im Schnee.", "A child plays in the snow."),
             ("Ein Mann fährt Fahrrad.", "A man rides a bike.")] * 2
    codec = build_codec(pairs)
    torch.manual_seed(0)
    m = create_transformer(codec.src_vocab_size, codec.tgt_vocab_size, "tiny", max_len=20)
    d = tmp_path_factory.mktemp("mt")
    path = save_checkpoint(d / "mt.pt", m, train_state=TrainState(), extra={"task": "multi30k", "vocab": codec.to_dict()})
    data = d / "data"; data.mkdir()
    for split in ("val", "test_2016_flickr"):
        (data / f"{split}.de").write_text("".join(s + "\n" for s, _ in pairs[:3]), encoding="utf-8")
        (data / f"{split}.en").write_text("".join(t + "\n" for _, t in pairs[:3]), encoding="utf-8")
    return path, codec, data


def entry_start(path: Path, suffix: str) -> int:
    "Offset in a torch zip checkpoint of the stored bytes of the entry whose name ends with `suffix`."
    import zipfile
    with zipfile.ZipFile(path) as z: info = next(i for i in z.infolist() if i.filename.endswith(suffix))
    with open(path, "rb") as f:                               # the local header's own name/extra lengths
        f.seek(info.header_offset + 26); n, m = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
    return info.header_offset + 30 + n + m


def _bad_checkpoints(d: Path, good: Path, marker: Path) -> dict:
    "name -> (path, words the refusal must contain)."
    data = good.read_bytes()
    ck = load_checkpoint(good)
    out = {}
    def put(name, b, *why): (d / name).write_bytes(b); out[name] = (d / name, why)
    put("empty.pt", b"", "empty")
    put("head.pt", data[:10], "corrupt")
    put("half.pt", data[: len(data) // 2], "corrupt")
    put("tail.pt", data[:-10], "corrupt")
    # random bytes, seeded: unseeded ones start with 0x80 (a pickle's first byte) once in 256 runs,
    # and are then read as a plain pickle
    garbage = random.Random(0).randbytes(5000)
    assert garbage[0] != 0x80
    put("garbage.pt", garbage, "is not a checkpoint")
    b = bytearray(data); i = entry_start(good, "data.pkl") + 40; b[i:i + 32] = bytes(x ^ 0x5A for x in b[i:i + 32])
    put("pickle_bytes.pt", bytes(b), "corrupt")
    put("text.pt", b"version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12\n", "Git LFS pointer", "git lfs pull")
    torch.save({**ck, "extra": {"vocab": ck["extra"].get("vocab"), "hook": Evil(marker)}}, d / "code_torch.pt")
    out["code_torch.pt"] = (d / "code_torch.pt", ("pickled Python objects",))
    put("code_pickle.pt", pickle.dumps(Evil(marker)), "pickled Python objects")
    torch.save(Evil(marker), d / "code_only.pt"); out["code_only.pt"] = (d / "code_only.pt", ("pickled Python objects",))
    torch.save(ck["model"], d / "state_dict.pt"); out["state_dict.pt"] = (d / "state_dict.pt", ("not an annotated_transformer checkpoint",))
    torch.save({k: v for k, v in ck.items() if k != "model"}, d / "no_model.pt"); out["no_model.pt"] = (d / "no_model.pt", ("no 'model'",))
    (d / "adir.pt").mkdir(); out["adir.pt"] = (d / "adir.pt", ("directory",))
    out["missing.pt"] = (d / "missing.pt", ("does not exist",))
    return out


@pytest.fixture(scope="module")
def bad(mt_ckpt, tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    marker = d / "PWNED"
    return _bad_checkpoints(d, mt_ckpt[0], marker), marker


CODE = ["code_torch.pt", "code_pickle.pt", "code_only.pt"]
BAD_NAMES = ["empty.pt", "head.pt", "half.pt", "tail.pt", "garbage.pt", "pickle_bytes.pt", "text.pt",
             *CODE,
             "state_dict.pt", "no_model.pt", "adir.pt", "missing.pt"]


def test_pickled_code_is_refused_and_never_runs(bad, mt_ckpt, capsys):
    "Whatever the message says: refused, naming the file, and the payload (os.system writing a marker) never ran."
    files, marker = bad
    for name in CODE:
        path, _ = files[name]
        for load in (load_checkpoint, model_from_checkpoint, lambda p: restore_checkpoint(p, tiny_model())):
            with pytest.raises(ValueError, match=re.escape(str(path))): load(path)
        for argv in (["translate", "--checkpoint", path, "Ein Hund."],
                     ["evaluate", "--checkpoint", path, "--data-dir", mt_ckpt[2]],
                     ["average", path, path, "--output", path.with_suffix(".avg")]):
            rc, out, err = run_main(capsys, *argv)
            assert rc == 1 and out == "" and str(path) in err and "Traceback" not in err, err
        assert not path.with_suffix(".avg").exists()
    assert not marker.exists(), "unpickling ran code"


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_checkpoint_refused_by_the_api(bad, name):
    files, marker = bad
    path, why = files[name]
    for load in (load_checkpoint, model_from_checkpoint, lambda p: restore_checkpoint(p, tiny_model())):
        with pytest.raises((ValueError, OSError)) as e: load(path)
        assert str(path) in str(e.value) and all(w in str(e.value) for w in why), str(e.value)
    assert not marker.exists(), "unpickling ran code"


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_checkpoint_refused_by_translate_and_evaluate(bad, mt_ckpt, capsys, name):
    files, marker = bad
    path, why = files[name]
    rc, out, err = run_main(capsys, "translate", "--checkpoint", path, "Ein Hund.")
    assert_one_line_error(rc, out, err, path, *why)
    rc, out, err = run_main(capsys, "evaluate", "--checkpoint", path, "--data-dir", mt_ckpt[2], "--json")
    assert_one_line_error(rc, out, err, path, *why)
    assert not marker.exists()


def test_bad_checkpoints_through_the_console_script(bad, mt_ckpt):
    "The same, in real processes: exit status 1, one line on stderr, nothing executed."
    files, marker = bad
    for name, cmd in (("half.pt", "translate"), ("state_dict.pt", "evaluate"), ("code_torch.pt", "translate")):
        path, why = files[name]
        extra = ["--data-dir", mt_ckpt[2]] if cmd == "evaluate" else ["Ein Hund."]
        r = cli(cmd, "--checkpoint", path, *extra)
        assert_one_line_error(r.returncode, r.stdout, r.stderr, path, *(why if name not in CODE else ()))
    assert not marker.exists()


def test_corrupted_tensor_bytes_are_refused(mt_ckpt, tmp_path):
    good = mt_ckpt[0]
    data = bytearray(good.read_bytes())
    start = entry_start(good, "data/0")                                # the stored bytes of the first tensor
    for i in range(start + 16, start + 48): data[i] ^= 0xFF
    (tmp_path / "flipped.pt").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="flipped.pt"): load_checkpoint(tmp_path / "flipped.pt")


def test_checkpoint_of_another_config_is_refused(tmp_path, capsys):
    "A model of another shape: the API names every differing field; --resume with another --preset is refused."
    p = save_checkpoint(tmp_path / "a.pt", tiny_model(), train_state=TrainState(step=3))
    with pytest.raises(ValueError, match=r"a\.pt was saved from a different model config: d_model=64 in the checkpoint vs 32 here"):
        restore_checkpoint(p, create_transformer(14, 14, "tiny", d_model=32, n_heads=4))
    with pytest.raises(ValueError, match="different model config: src_vocab_size=14 in the checkpoint vs 20 here"):
        restore_checkpoint(p, create_transformer(20, 20, "tiny"))
    d = tmp_path / "run"
    rc, out, err = run_main(capsys, *COPY, "--max-steps", 2, "--checkpoint-dir", d)
    assert rc == 0, err
    before = sorted(p.name for p in d.iterdir())
    rc, out, err = run_main(capsys, *COPY, "--max-steps", 4, "--checkpoint-dir", d, "--resume", "--preset", "small")
    assert_one_line_error(rc, out, err, d / "step_00000002.pt", "different model config", "d_model=64 in the checkpoint vs 256 here")
    assert sorted(p.name for p in d.iterdir()) == before                  # nothing written


def test_checkpoint_of_another_vocabulary_is_refused(mt_ckpt, tmp_path, capsys):
    path, codec, data = mt_ckpt
    ck = load_checkpoint(path)
    other = build_codec([("ganz andere Wörter hier", "quite other words here")] * 2)
    torch.save({**ck, "extra": {**ck["extra"], "vocab": other.to_dict()}}, tmp_path / "othervocab.pt")
    torch.save({**ck, "extra": {}}, tmp_path / "novocab.pt")
    copy_ckpt = save_checkpoint(tmp_path / "copy.pt", tiny_model(), extra={"task": "copy"})
    for p, why in ((tmp_path / "othervocab.pt", f"model was built for ({codec.src_vocab_size}, {codec.tgt_vocab_size})"),
                   (tmp_path / "novocab.pt", "has no vocabulary"), (copy_ckpt, "not a translation checkpoint")):
        rc, out, err = run_main(capsys, "translate", "--checkpoint", p, "Ein Hund.")
        assert_one_line_error(rc, out, err, p, why)
    rc, out, err = run_main(capsys, "average", path, tmp_path / "othervocab.pt", "--output", tmp_path / "avg.pt")
    assert_one_line_error(rc, out, err, "different vocabularies")
    assert not (tmp_path / "avg.pt").exists()


def _malformed(ck, name):
    v = ck["extra"]["vocab"]
    return {"config_keys": {**ck, "config": {**ck["config"], "n_layerz": 2}},
            "config_invalid": {**ck, "config": {**ck["config"], "n_heads": 5}},
            "weights_shape": {**ck, "config": {**ck["config"], "d_ff": 32}},
            "config_not_dict": {**ck, "config": "tiny"},
            "model_not_dict": {**ck, "model": [1, 2, 3]},
            "extra_not_dict": {**ck, "extra": "vocab"},
            "vocab_fields_missing": {**ck, "extra": {"vocab": {"format": v["format"], "kind": "word"}}},
            "vocab_bpe_garbage": {**ck, "extra": {"vocab": {"format": v["format"], "kind": "bpe", "tokenizer": "{oops"}}},
            }[name]


@pytest.mark.parametrize("name", [n for n in
    ["config_keys", "config_invalid", "weights_shape", "config_not_dict", "model_not_dict", "extra_not_dict",
     "vocab_fields_missing", "vocab_bpe_garbage"]])
def test_malformed_checkpoint_is_one_line_naming_the_file(mt_ckpt, tmp_path, capsys, name):
    p = tmp_path / f"{name}.pt"
    torch.save(_malformed(load_checkpoint(mt_ckpt[0]), name), p)
    try: rc, out, err = run_main(capsys, "translate", "--checkpoint", p, "Ein Hund.")
    except Exception as e: pytest.fail(f"uncaught {type(e).__name__}: {e}")
    assert_one_line_error(rc, out, err, p)


# --------------------------------------------------------------------------------------------------------------
# 4. translate input
# --------------------------------------------------------------------------------------------------------------

def test_translate_stdin_blank_long_unknown_lines(mt_ckpt):
    path, codec, _ = mt_ckpt
    lines = ["Ein Hund läuft im Park.", "", "   ", "Der Quokka frühstückt Xylophone.", "Ein Mann " * 30,
             "\t", "🙂 ☃ 你好 שלום"]
    r = cli("translate", "--checkpoint", path, "--beam-size", 2, input="\r\n".join(lines) + "\n")
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout.split("\n")
    assert out[-1] == "" and len(out) - 1 == len(lines), r.stdout       # one output line per input line
    assert out[1] == out[2] == out[5] == ""                             # blank in, blank out (the model is not run)
    warning = [l for l in strip_progress(r.stderr).splitlines() if "warning" in l]
    assert len(warning) == 1 and "sentence 5 is longer than the model's maximum of 20 tokens" in warning[0], r.stderr
    assert "Traceback" not in r.stderr


def test_translate_unknown_words_become_unk(mt_ckpt, capsys):
    path, codec, _ = mt_ckpt
    ids = codec.encode_src(["Der Quokka frühstückt.", "🙂", "a" * 3000, "\x00\x1b"])
    assert all(UNK_IDX in s for s in ids[:3])
    rc, out, err = run_main(capsys, "translate", "--checkpoint", path, "--beam-size", 1,
                            "Der Quokka frühstückt.", "🙂", "a" * 3000, "\x00\x1b", "")
    assert rc == 0, err
    assert len(out.split("\n")) == 6 and out.split("\n")[4] == ""         # five lines; the empty argument stays empty


def test_translate_undecodable_stdin_names_the_line(mt_ckpt):
    r = cli("translate", "--checkpoint", mt_ckpt[0], input=b"Ein Hund.\nEin Mann\xe9 l\xe4uft.\n")
    assert_one_line_error(r.returncode, r.stdout, r.stderr, "stdin line 2", "not UTF-8")


# --------------------------------------------------------------------------------------------------------------
# 5. data files
# --------------------------------------------------------------------------------------------------------------

@pytest.fixture
def data_cases(tmp_path):
    "name -> (data dir, words the error must contain); each breaks split test_2016_flickr in one way."
    def mk(name, de=None, en=None, split="test_2016_flickr"):
        d = tmp_path / name; d.mkdir()
        if de is not None: (d / f"{split}.de").write_bytes(de)
        if en is not None: (d / f"{split}.en").write_bytes(en)
        return d
    cases = {
        "mismatch": (mk("mismatch", b"a\nb\nc\n", b"a\nb\n"), ["test_2016_flickr.de has 3 lines", "test_2016_flickr.en has 2"]),
        "empty": (mk("empty", b"", b""), ["test_2016_flickr.de is empty"]),
        "empty_target": (mk("empty_target", b"a\n", b""), ["test_2016_flickr.en is empty"]),
        "missing_split": (mk("missing_split", b"a\n", b"b\n", split="val"), ["missing_split lacks test_2016_flickr.de.gz, test_2016_flickr.en.gz"]),
        "one_side": (mk("one_side", b"a\n", None), ["one_side lacks", "test_2016_flickr.en.gz"]),
        "not_utf8": (mk("not_utf8", b"gut\nschl\xe9cht\n", b"good\nbad\n"), ["not_utf8/test_2016_flickr.de, line 2", "not UTF-8"]),
        "bad_gzip": (mk("bad_gzip"), ["cannot read", "test_2016_flickr.de.gz"]),
        "no_root": (tmp_path / "nowhere", ["data directory", "nowhere (from --data-dir) does not exist"]),
        "wrong_root": (mk("wrong_root"), ["data directory", "wrong_root (from --data-dir) holds neither a multi30k/ folder"]),
    }
    (tmp_path / "bad_gzip" / "test_2016_flickr.de.gz").write_bytes(gzip.compress(b"a\nb\n")[:-8])
    (tmp_path / "bad_gzip" / "test_2016_flickr.en.gz").write_bytes(gzip.compress(b"a\nb\n"))
    return cases


DATA_CASES = ["mismatch", "empty", "empty_target", "missing_split", "one_side", "not_utf8", "bad_gzip", "no_root", "wrong_root"]


@pytest.mark.parametrize("name", DATA_CASES)
def test_bad_data_files_api(data_cases, name):
    d, needles = data_cases[name]
    with pytest.raises((ValueError, OSError)) as e: load_split("test_2016_flickr", d, download=False)
    for n in needles: assert n in str(e.value), (n, str(e.value))


@pytest.mark.parametrize("name", DATA_CASES)
def test_bad_data_files_cli_evaluate(data_cases, mt_ckpt, capsys, name):
    d, needles = data_cases[name]
    rc, out, err = run_main(capsys, "evaluate", "--checkpoint", mt_ckpt[0], "--data-dir", d, "--json")
    assert_one_line_error(rc, out, err, *needles)


def test_data_root_from_the_environment(tmp_path, monkeypatch, mt_ckpt, capsys):
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "gone"))
    needle = f"{tmp_path / 'gone'} (from {DATA_ENV}) does not exist"
    with pytest.raises(FileNotFoundError, match=re.escape(needle)): resolve_data_dir()
    assert_one_line_error(*run_main(capsys, "evaluate", "--checkpoint", mt_ckpt[0]), needle)


def test_file_as_data_root_is_called_a_file(tmp_path):
    (tmp_path / "train.de").write_text("x\n")
    with pytest.raises(OSError, match="not a directory"): resolve_data_dir(tmp_path / "train.de")


def test_read_parallel_names_both_files(tmp_path):
    (tmp_path / "a.de").write_text("1\n2\n"); (tmp_path / "a.en").write_text("1\n")
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'a.de'} has 2 lines, {tmp_path / 'a.en'} has 1")):
        read_parallel(tmp_path / "a.de", tmp_path / "a.en")
    with pytest.raises(OSError, match=re.escape(str(tmp_path / "none.de"))): read_lines(tmp_path / "none.de")
    with pytest.raises(ValueError, match="unknown Multi30k split 'test2016'"): ensure_splits(["test2016"], tmp_path)


# --------------------------------------------------------------------------------------------------------------
# 7. CLI hygiene
# --------------------------------------------------------------------------------------------------------------

USAGE_ERRORS = [
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["train", "--task", "copy", "--frobnicate"], "unrecognized arguments: --frobnicate"),
    (["translate", "--checkpoint", "x", "--json", "hi"], "unrecognized arguments: --json"),
    (["train", "--task", "copy", "--max-steps", "0"], "--max-steps: 0 must be at least 1"),
    (["train", "--task", "copy", "--max-steps", "-5"], "--max-steps: -5 must be at least 1"),
    (["train", "--task", "copy", "--epochs", "0"], "--epochs: 0 must be at least 1"),
    (["train", "--task", "copy", "--save-every", "0"], "--save-every: 0 must be at least 1"),
    (["train", "--task", "copy", "--max-steps", "ten"], "--max-steps: 'ten' is not an integer"),
    (["train", "--task", "copy", "--lr-scale", "-1"], "--lr-scale: -1.0 must be at least 0"),
    (["train", "--task", "copy", "--lr-scale", "nan"], "--lr-scale: 'nan' is not a finite number"),
    (["train", "--task", "copy", "--lr-scale", "0"], "--lr-scale: 0.0 must be more than 0"),
    (["translate", "--checkpoint", "x", "--length-penalty", "10.5"], "--length-penalty: 10.5 must be at most 10"),
    (["attention", "Ein Hund.", "--output", "a.png", "--kind", "cross,"], "--kind: 'cross,' has an empty name"),
    (["train", "--task", "nope"], "invalid choice: 'nope'"),
    (["train", "--precision", "fp8"], "invalid choice: 'fp8'"),
    (["train", "--beam-size", "-1"], "--beam-size: -1 must be at least 1"),
    (["translate", "--checkpoint", "x", "--beam-size", "-1", "hi"], "--beam-size: -1 must be at least 1"),
    (["translate", "--checkpoint", "x", "--beam-size", "0", "hi"], "--beam-size: 0 must be at least 1"),
    (["translate", "--checkpoint", "x", "--batch-size", "0"], "--batch-size: 0 must be at least 1"),
    (["translate", "--checkpoint", "x", "--length-penalty", "-0.5"], "--length-penalty: -0.5 must be at least 0"),
    (["translate", "--checkpoint", "x", "--model", "de-en", "hi"], "not allowed with argument --checkpoint"),
    (["evaluate", "--checkpoint", "x", "--beam-size", "-3"], "--beam-size: -3 must be at least 1"),
    (["average", "--output", "o.pt"], "the following arguments are required: checkpoints"),
    (["bench", "--quick", "--frobnicate"], "unrecognized arguments: --frobnicate"),
    # range errors: one line, as every other error (argparse's 14-line usage block came first)
    (["translate", "--beam-size", "0", "hi"], "argument --beam-size: 0 must be at least 1"),
    (["translate", "--length-penalty", "50", "hi"], "argument --length-penalty: 50"),
    (["translate", "--batch-size", "0", "hi"], "argument --batch-size: 0 must be at least 1"),
    (["translate", "--n-best", "0", "hi"], "argument --n-best: 0 must be at least 1"),
    (["translate", "--window", "0", "hi"], "argument --window: 0 must be at least 1"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
]


@pytest.mark.parametrize("argv,message", USAGE_ERRORS, ids=[" ".join(a) for a, _ in USAGE_ERRORS])
def test_usage_errors_exit_2(capsys, argv, message):
    assert_usage_error(*run_main(capsys, *argv), message)


def test_usage_and_runtime_errors_through_the_console_script(tmp_path, mt_ckpt):
    r = cli("train", "--task", "copy", "--max-steps", "0")
    assert_usage_error(r.returncode, r.stdout, r.stderr, "--max-steps: 0 must be at least 1")
    r = cli("translate", "--checkpoint", "x", "--beam-size", "-1", "hi")
    assert_usage_error(r.returncode, r.stdout, r.stderr, "--beam-size: -1 must be at least 1")
    r = cli("evaluate", "--checkpoint", tmp_path / "missing.pt", "--data-dir", mt_ckpt[2], "--json")
    assert_one_line_error(r.returncode, r.stdout, r.stderr, tmp_path / "missing.pt", "does not exist")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_unavailable_cuda_device_is_one_line(capsys):
    for argv in (["train", "--task", "copy", "--max-steps", "1", "--device", "cuda"],
                 ["translate", "--checkpoint", "x", "--device", "cuda:1", "hi"], ["bench", "--quick", "--device", "cuda"]):
        assert_one_line_error(*run_main(capsys, *argv), "--device cuda", "CUDA is not available")


def test_runtime_errors_exit_1_with_one_line(tmp_path, capsys):
    assert_one_line_error(*run_main(capsys, "train", "--task", "copy", "--resume"), "--resume needs --checkpoint-dir")
    assert_one_line_error(*run_main(capsys, "train", "--task", "copy", "--resume", "--checkpoint-dir", tmp_path), "no checkpoint")
    assert_one_line_error(*run_main(capsys, "train", "--task", "copy", "--device", "bogus", "--max-steps", "1"), "bogus")
    assert_one_line_error(*run_main(capsys, "average", tmp_path / "a.pt", "--output", tmp_path / "o.pt"), "a.pt does not exist")
    rc, out, err = run_main(capsys, "train", "--task", "copy", "--max-steps", "3", "--lr-scale", "1e30", "--json")
    assert_one_line_error(rc, out, err, "loss became")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_evaluate_output_write_failure_names_the_file_and_still_scores(mt_ckpt):
    r = cli("evaluate", "--checkpoint", mt_ckpt[0], "--data-dir", mt_ckpt[2], "--beam-size", 1, "--output", "/dev/full")
    assert r.returncode == 1 and "error: --output /dev/full: could not write it" in r.stderr, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "BLEU" in r.stdout, r.stdout           # the scores are not lost


def test_evaluate_json_is_one_object_on_stdout(mt_ckpt):
    r = cli("evaluate", "--checkpoint", mt_ckpt[0], "--data-dir", mt_ckpt[2], "--beam-size", 1, "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert len(lines) == 1, r.stdout
    res = json.loads(lines[0])
    assert res["split"] == "test_2016_flickr" and res["sentences"] == 3 and "signature" in res
    assert "test_2016_flickr: 100%" in r.stderr                          # the progress bar, named, went to stderr


# --------------------------------------------------------------------------------------------------------------
# 6. numerics: what tests/test_numerics.py does not cover — gradients in reduced precision
# --------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fused", [True, False])
def test_bf16_autocast_backward_with_all_padding_rows_is_finite(fused):
    torch.manual_seed(0)
    model = create_transformer(20, 20, "tiny")                       # the paper's layers: the fused kernel
    if not fused: make_fast(model, ModelLevers(fused_kernel=False))          # the fast twins, explicit attention
    src = torch.tensor([[1, 5, 6, 2, 0, 0], [PAD_IDX] * 6])          # the second source is all padding
    tgt = torch.tensor([[1, 7, 8, 2], [PAD_IDX] * 4])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = model(src, tgt, model.make_src_mask(src), model.make_tgt_mask(tgt))
        logits = model.generator.logits(h)
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits).all()
    logits.float().log_softmax(-1).sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
