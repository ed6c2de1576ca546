"""Your corpus, your files (issue 16): train on any line-aligned parallel text, translate a file to a file, write an
n-best list, evaluate without repeating the data, plot attention — from the console script; and the bad-input errors,
each one line naming the file and the line (exit status 1), or a usage error (exit status 2).

Everything here runs on files the tests write (two made-up languages, a few hundred pairs) or on the shipped sample:
no data root, no network."""
import contextlib, gzip, io, json, os, random, subprocess, sys
from pathlib import Path
import pytest, torch
from annotated_transformer.cli import main
from annotated_transformer.data import SAMPLE_DIR, load_split

torch.set_num_threads(1)                                    # tiny models in process: one thread is fastest, and shares the CPU well

EXE = Path(sys.executable).parent / "annotated-transformer"
DATA_ENV, URL_ENV = "ANNOTATED_TRANSFORMER_DATA", "ANNOTATED_TRANSFORMER_DATA_URL"


def env(**kw):
    e = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    e.pop(DATA_ENV, None)                                   # the run must find its data by itself
    for k, v in kw.items(): e[k] = str(v)
    return e


def cli(*args, cwd=None, **kw):
    return subprocess.run([str(EXE), *map(str, args)], capture_output=True, text=True, timeout=300, env=env(**kw), cwd=cwd)


def run_main(*args) -> tuple[int, str, str]:
    "`main` in process (fast): (exit status, stdout, stderr); a usage error's SystemExit becomes its status."
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try: rc = main([str(a) for a in args])
        except SystemExit as e: rc = e.code
    return rc, out.getvalue(), err.getvalue()


WORDS = "ka lu mi so te ra no vi pe zu ba do fi go hu je".split()


def make_corpus(folder: Path, n_train=300, n_valid=40, n_test=30, seed=0) -> Path:
    "Two tiny languages: xx sentences of 3–6 words; yy says the same with each word spelled backwards, in reverse order."
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for name, n in (("train", n_train), ("valid", n_valid), ("test", n_test)):
        xx = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 6))) for _ in range(n)]
        yy = [" ".join(w[::-1] for w in reversed(s.split())) for s in xx]
        (folder / f"{name}.xx").write_text("".join(s + "\n" for s in xx), encoding="utf-8")
        data = "".join(s + "\n" for s in yy).encode()
        if name == "train": (folder / f"{name}.yy.gz").write_bytes(gzip.compress(data))   # gzipped sides work too
        else: (folder / f"{name}.yy").write_bytes(data)
    return folder


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("corpus") / "toy")


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    "The tiny recipe on 300 pairs for 60 updates, from the console script (about ten seconds)."
    run = tmp_path_factory.mktemp("run") / "toy"
    r = cli("train", "--recipe", "tiny", "--train", corpus / "train", "--valid", corpus / "valid", "--test", corpus / "test",
            "--src", "xx", "--tgt", "yy", "--max-steps", 60, "--save-every", 20, "--beam-size", 1,
            "--checkpoint-dir", run, "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    return run, json.loads(r.stdout.strip().splitlines()[-1])


def test_train_on_your_files(trained, corpus):
    run, res = trained
    assert (res["src"], res["tgt"], res["train_pairs"], res["updates"]) == ("xx", "yy", 300, 60)
    assert res["evaluated"] == ["val", "test"] and [s["set"] for s in res["scores"]] == ["val", "test"]
    assert res["corpus"] == {"kind": "files", "data_dir": None, "train": str(corpus / "train"),
                             "valid": str(corpus / "valid"), "test": [str(corpus / "test")]}
    assert res["train_loss_end"] < res["train_loss_start"]
    assert (run / "vocab.json").exists() and (run / "history.png").read_bytes()[:4] == b"\x89PNG"
    rows = (run / "history.csv").read_text().splitlines()
    assert rows[0] == "step,train_loss,learning_rate,val_loss" and len(rows) == 61
    assert sum(1 for r in rows[1:] if r.split(",")[3]) >= 1              # validation rows carry the validation loss


def test_translate_file_to_file_and_nbest(trained, tmp_path):
    _, res = trained
    src = tmp_path / "in.xx"
    src.write_text("ka lu mi\n\nso te ra no\n", encoding="utf-8")
    r = cli("translate", "--checkpoint", res["checkpoint"], "--input", src, "--output", tmp_path / "out.yy")
    assert r.returncode == 0 and r.stdout == "", r.stderr
    out = (tmp_path / "out.yy").read_text(encoding="utf-8").split("\n")
    assert len(out) == 4 and out[1] == "" and out[3] == ""                # one line per input line, blank stays blank
    r = cli("translate", "--checkpoint", res["checkpoint"], "--input", src, "--n-best", 3, "--beam-size", 2,
            "--output", tmp_path / "nbest.tsv")
    assert r.returncode == 0, r.stderr
    rows = [l.split("\t") for l in (tmp_path / "nbest.tsv").read_text(encoding="utf-8").splitlines()]
    assert all(len(row) == 4 for row in rows)
    assert [(int(i), int(k)) for i, k, _, _ in rows] == [(1, 1), (1, 2), (1, 3), (3, 1), (3, 2), (3, 3)]   # no rows for the blank line
    for line in ("1", "3"):
        scores = [float(s) for i, _, s, _ in rows if i == line]
        assert scores == sorted(scores, reverse=True)


def test_evaluate_after_train_needs_no_data_flag(trained, tmp_path):
    run, res = trained
    r = cli("evaluate", "--checkpoint", res["checkpoint"], "--beam-size", 1, "--output", tmp_path / "hyps.yy", "--json",
            cwd=tmp_path, **{URL_ENV: (tmp_path / "nowhere").as_uri(), "XDG_CACHE_HOME": tmp_path / "cache"})
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout.strip().splitlines()[-1])
    assert (j["split"], j["sentences"]) == ("test", 30) and j["hypotheses"] == [str(tmp_path / "hyps.yy")]
    assert j["bleu"] == res["test_bleu"]                                 # the same set, the same (greedy) decoding
    assert len((tmp_path / "hyps.yy").read_text(encoding="utf-8").splitlines()) == 30


def test_attention_from_the_shell(trained, tmp_path):
    _, res = trained
    r = cli("attention", "--checkpoint", res["checkpoint"], "ka lu mi", "--kind", "cross,encoder", "--head", 0,
            "--output", tmp_path / "maps.png")
    assert r.returncode == 0, r.stderr
    for kind in ("cross", "encoder"): assert (tmp_path / f"maps-{kind}.png").read_bytes()[:4] == b"\x89PNG"


def test_an_explicit_flag_wins_and_vocab_from_an_earlier_run(trained, corpus, tmp_path):
    run, res = trained
    other = make_corpus(tmp_path / "other", 20, 5, 7, seed=1)
    rc, out, err = run_main("evaluate", "--checkpoint", res["checkpoint"], "--test", other / "test", "--beam-size", 1, "--json")
    assert rc == 0, err
    assert json.loads(out.splitlines()[-1])["sentences"] == 7
    rc, out, err = run_main("train", "--recipe", "tiny", "--train", other / "train", "--valid", other / "valid", "--src", "xx",
                            "--tgt", "yy", "--vocab", run / "vocab.json", "--max-steps", 2, "--beam-size", 1,
                            "--checkpoint-dir", tmp_path / "run2", "--json")
    assert rc == 0, err
    j = json.loads(out.splitlines()[-1])
    assert j["src_vocab_size"] == res["src_vocab_size"] and f"from {run / 'vocab.json'}" in err


def test_multi30k_run_remembers_its_data_root(tmp_path, monkeypatch):
    "A Multi30k run (here on a data root cut from the shipped sample) records its data root: evaluate needs no --data-dir, whatever the environment says."
    root = tmp_path / "root" / "multi30k"; root.mkdir(parents=True)       # a small Multi30k-shaped root cut from the sample
    for split, n in (("train", 200), ("val", 5), ("test", 5)):
        pairs = load_split(split, SAMPLE_DIR)[:n]
        for i, lang in enumerate(("de", "en")):
            (root / f"{split}.{lang}.gz").write_bytes(gzip.compress("".join(p[i] + "\n" for p in pairs).encode()))
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "no-such-root"))
    rc, out, err = run_main("train", "--recipe", "tiny", "--data-dir", root.parent, "--max-steps", 2,
                            "--beam-size", 1, "--checkpoint-dir", tmp_path / "run", "--json")
    assert rc == 0, err
    ckpt = json.loads(out.splitlines()[-1])["checkpoint"]
    rc, out, err = run_main("evaluate", "--checkpoint", ckpt, "--beam-size", 1, "--max-sentences", 5, "--json")
    assert rc == 0, err
    assert json.loads(out.splitlines()[-1])["split"] == "test"           # the sample's test set, found through the checkpoint
    rc, out, err = run_main("evaluate", "--checkpoint", ckpt, "--data-dir", tmp_path / "elsewhere")   # the flag wins
    assert rc == 1 and "elsewhere" in err


# --- bad input: one line naming the file and the line, exit status 1 ------------------------------------------

def bad_train(folder: Path, tmp_path: Path, *extra) -> str:
    rc, out, err = run_main("train", "--recipe", "tiny", "--train", folder / "train", "--valid", folder / "valid",
                            "--src", "xx", "--tgt", "yy", "--max-steps", 1, "--checkpoint-dir", tmp_path / "run", *extra)
    assert rc == 1, (rc, err)
    errors = [l for l in err.splitlines() if "error:" in l]
    assert len(errors) == 1 and err.rstrip().endswith(errors[0]), err   # one line, and it is the last thing said
    return errors[0]


@pytest.mark.parametrize("case", ["mismatch", "bytes", "empty", "too-long", "missing"])
def test_bad_input_names_file_and_line(case, tmp_path):
    c = make_corpus(tmp_path / "c", 40, 5, 5)
    if case == "mismatch":
        with open(c / "train.xx", "a", encoding="utf-8") as f: f.write("ka lu\nmi so\n")
        msg = bad_train(c, tmp_path)
        assert f"{c / 'train.xx'}, line 41: {c / 'train.yy.gz'} ends at line 40, {c / 'train.xx'} has 42 lines" in msg
    elif case == "bytes":
        lines = (c / "valid.xx").read_bytes().split(b"\n")
        lines[2] = b"ka \xff lu"
        (c / "valid.xx").write_bytes(b"\n".join(lines))
        assert f"{c / 'valid.xx'}, line 3: bytes that are not UTF-8" in bad_train(c, tmp_path)
    elif case == "empty":
        (c / "valid.yy").write_bytes(b"")
        assert f"{c / 'valid.yy'}, line 1: the file is empty, but {c / 'valid.xx'} is not" in bad_train(c, tmp_path)
    elif case == "too-long":                                             # refused, not cut: the model's max_len is 1024 ids
        lines = (c / "valid.xx").read_text(encoding="utf-8").splitlines()
        lines[3] = " ".join(["ka"] * 1100)
        (c / "valid.xx").write_text("\n".join(lines) + "\n", encoding="utf-8")
        msg = bad_train(c, tmp_path)
        assert f"{c / 'valid.xx'}, line 4: " in msg and "more than the model's maximum of 1024" in msg
    else:
        (c / "valid.yy").unlink()
        assert f"{c / 'valid.yy'}: no such file (nor {c / 'valid.yy'}.gz)" in bad_train(c, tmp_path)


def test_translate_input_with_bad_bytes(trained, tmp_path):
    _, res = trained
    (tmp_path / "in.xx").write_bytes(b"ka lu\nmi \xfe so\n")
    rc, _, err = run_main("translate", "--checkpoint", res["checkpoint"], "--input", tmp_path / "in.xx")
    assert rc == 1 and f"{tmp_path / 'in.xx'}, line 2: bytes that are not UTF-8" in err


@pytest.mark.parametrize("args, msg", [
    (["train", "--train", "x"], "--train PREFIX needs --valid PREFIX"),
    (["train", "--valid", "x"], "--valid and --test go with --train PREFIX"),
    (["train", "--task", "copy", "--train", "x", "--valid", "y"], "--train is for translation"),
    (["train", "--train", "x", "--valid", "y", "--data-dir", "z"], "--data-dir is Multi30k's data root"),
    (["train", "--src", "d e"], "is not a language code"),
    (["train", "--vocab", "no/such/vocab.json"], "is neither bpe, word, nor an existing file"),
    (["translate", "--input", "x", "a sentence"], "give sentences as arguments or --input FILE, not both"),
    (["translate", "--n-best", "0", "x"], "0 must be at least 1"),
    (["evaluate", "--test", "x", "--data-dir", "y"], "--test PREFIX and --data-dir are exclusive"),
])
def test_usage_errors_exit_2(args, msg):
    rc, _, err = run_main(*args)
    assert rc == 2 and msg in err, (rc, err)


def test_multi30k_still_refuses_other_languages(tmp_path):
    rc, _, err = run_main("train", "--recipe", "tiny", "--data-dir", SAMPLE_DIR, "--src", "fr", "--tgt", "en", "--max-steps", 1,
                          "--checkpoint-dir", tmp_path / "run")
    assert rc == 1 and "cannot translate fr→en: this data pairs de and en" in err


def prepare(corpus_dir: Path, **kw):
    "`prepare_run` as `train` calls it, on your files (no model, no training): the run and its log lines."
    from types import SimpleNamespace
    from annotated_transformer.data import Corpus
    from annotated_transformer.multi30k import RunOptions, prepare_run
    logs, overrides = [], kw.pop("overrides", {})
    kw = {"recipe_name": "tiny", "src": "xx", "tgt": "yy", "evaluate_splits": ("val",),
          "corpus": Corpus.files(corpus_dir / "train", corpus_dir / "valid"), **kw}
    ctx = SimpleNamespace(device=torch.device("cpu"), is_main=True)
    return prepare_run(ctx, RunOptions(**kw), overrides, logs.append), logs


def test_a_pair_with_an_empty_side_is_skipped_and_named(tmp_path):
    c = make_corpus(tmp_path / "blank", 20, 6, 1)
    xx = (c / "train.xx").read_text(encoding="utf-8").splitlines(); xx[4] = ""              # line 5: a blank source
    (c / "train.xx").write_text("".join(s + "\n" for s in xx), encoding="utf-8")
    yy = gzip.decompress((c / "train.yy.gz").read_bytes()).decode().splitlines(); yy[8] = " \t"  # line 9: only whitespace
    (c / "train.yy.gz").write_bytes(gzip.compress("".join(s + "\n" for s in yy).encode()))
    run, logs = prepare(c, checkpoint_dir=tmp_path / "run")
    assert len(run.train_pairs) == 18 and all(s.strip() and t.strip() for s, t in run.train_pairs)
    assert run.train_pairs[4] == (xx[5], yy[5])                              # the next pair moves up: nothing else changes
    assert (f"skipped 2 pairs with an empty side: {c / 'train.xx'} line 5, {c / 'train.yy.gz'} line 9"
            in "\n".join(logs)), logs
    assert run.skipped == {"train": [f"{c / 'train.xx'} line 5", f"{c / 'train.yy.gz'} line 9"]}
    assert len(run.val_pairs) == 6                                           # a clean split: nothing said, nothing skipped
    run, logs = prepare(c, checkpoint_dir=tmp_path / "run", max_train_pairs=6)      # lines 1-7: 6 kept, line 5 left out
    assert len(run.train_pairs) == 6 and run.skipped == {"train": [f"{c / 'train.xx'} line 5"]}


def test_the_warmup_fits_a_short_run_on_your_files(tmp_path):
    "500 pairs with the small recipe plan a few dozen updates: its 600-update warmup would never reach the peak rate."
    import math
    from annotated_transformer.checkpoints import save_checkpoint
    from annotated_transformer.multi30k import RECIPES, training_parts
    c = make_corpus(tmp_path / "c500", 500, 20, 1)
    run, _ = prepare(c, recipe_name="small", checkpoint_dir=tmp_path / "run")
    model, loader, _, _, sched, _ = training_parts(run, torch.device("cpu"))
    planned = math.ceil(len(loader) / run.recipe.accum_steps) * run.recipe.epochs
    assert planned < RECIPES["small"].warmup_steps
    assert run.recipe.warmup_steps <= planned / 4, f"warmup {run.recipe.warmup_steps} of {planned} planned updates"
    from annotated_transformer.multi30k import WARMUP_SHARE, fitted_warmup, run_length
    assert (run.recipe.warmup_steps == fitted_warmup(RECIPES["small"].warmup_steps, planned)
            == max(1, math.floor(planned * WARMUP_SHARE)))
    peak = lambda w, scale: scale * model.config.d_model ** -0.5 * w ** -0.5      # §5.3's rate at step = warmup
    test_peak = peak(run.recipe.warmup_steps, run.recipe.lr_scale)
    assert abs(test_peak / peak(RECIPES["small"].warmup_steps, RECIPES["small"].lr_scale) - 1) < 1e-9          # the recipe's peak rate, reached sooner
    for _ in range(run.recipe.warmup_steps - 1): sched.optimizer.step(); sched.step()
    assert abs(sched.get_last_lr()[0] / test_peak - 1) < 1e-6         # update number `warmup` runs at the recipe's peak rate
    assert run_length(len(loader), run.recipe, max_steps=None, epochs=None)[2] == planned
    logs = []                                                  # the line that says so, with max_steps: the planned updates
    run, _ = prepare(c, recipe_name="small", checkpoint_dir=tmp_path / "run")
    training_parts(run, torch.device("cpu"), max_steps=20, log=logs.append)
    assert run.recipe.warmup_steps == 5 and any(f"warmup shortened from {RECIPES['small'].warmup_steps} to 5 updates" in m and "20 planned" in m
                                                 for m in logs), logs
    save_checkpoint(tmp_path / "run" / "step_1.pt", model, extra={     # what `fit_run` records: the fitted recipe
        "task": "multi30k", "recipe_name": "small", "seed": 0, "max_train_pairs": None, "src": "xx", "tgt": "yy",
        "recipe": run.recipe.to_dict(), "vocab": run.codec.to_dict(), "data": run.corpus.to_dict()})
    resumed, logs = prepare(c, recipe_name="small", checkpoint_dir=tmp_path / "run", resume=True)
    training_parts(resumed, torch.device("cpu"), log=logs.append)  # resumed: the recorded schedule, not fitted again
    assert (resumed.recipe.warmup_steps, resumed.recipe.lr_scale) == (5, run.recipe.lr_scale)
    assert not any("warmup" in m for m in logs)
    run, logs = prepare(c, recipe_name="small", checkpoint_dir=tmp_path / "run2", overrides={"warmup_steps": 800})
    training_parts(run, torch.device("cpu"), log=logs.append)
    assert run.recipe.warmup_steps == 800                                    # --warmup-steps given: the user's choice stands
