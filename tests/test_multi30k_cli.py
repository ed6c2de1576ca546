"""The main job from the command line: train a tiny model on 2,000 real Multi30k pairs, translate, evaluate, average;
and the data errors a user can run into (mismatched files, bad bytes, missing files offline)."""
import gzip, json, os, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXE = Path(sys.executable).parent / "annotated-transformer"
DATA = Path(os.environ.get("ANNOTATED_TRANSFORMER_DATA") or ROOT.parent / "shared" / "data")


def env(**kw):
    e = {**os.environ, "ANNOTATED_TRANSFORMER_DATA": str(DATA), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    for k, v in kw.items():
        if v is None: e.pop(k, None)
        else: e[k] = str(v)
    return e


def cli(*args, input=None, timeout=600, **kw):
    return subprocess.run([str(EXE), *map(str, args)], capture_output=True, timeout=timeout,
                          input=input, env=env(**kw), text=not isinstance(input, bytes))


def last_json(stdout):
    if isinstance(stdout, bytes): stdout = stdout.decode()
    lines = stdout.strip().splitlines()
    assert lines, "no output"
    return json.loads(lines[-1])


needs_data = pytest.mark.skipif(not (DATA / "multi30k" / "train.de.gz").exists() and not (DATA / "train.de.gz").exists(),
                                reason=f"Multi30k not found under {DATA}")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    "Train the tiny recipe on the first 2,000 training pairs for 300 updates (about a minute)."
    run = tmp_path_factory.mktemp("run") / "tiny"
    r = cli("train", "--task", "multi30k", "--preset", "tiny", "--max-train-pairs", 2000, "--max-steps", 300,
            "--save-every", 60, "--beam-size", 1, "--checkpoint-dir", run, "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    return run, last_json(r.stdout), r


@needs_data
def test_train_loss_drops_and_reports_bleu(trained):
    run, res, r = trained
    assert res["updates"] == 300 and res["train_pairs"] == 2000
    assert res["train_loss_end"] < res["train_loss_start"] - 1.5, res
    for k in ("val_bleu", "test_2016_flickr_bleu"): assert 0 <= res[k] <= 100
    assert "tok:13a" in res["signature"] and "case:mixed" in res["signature"]
    assert len(res["averaged"]) == 5 and (run / "averaged.pt").exists()
    assert res["selected"] in ("averaged", "last") and "val_bleu_averaged" in res and "val_bleu_last" in res
    assert Path(res["checkpoint"]).exists()
    assert "train" in r.stderr                                # the progress bar went to stderr


@needs_data
def test_translate_arguments_and_stdin(trained):
    run, res, _ = trained
    ckpt = res["checkpoint"]
    r = cli("translate", "--checkpoint", ckpt, "Ein Mann fährt Fahrrad.", "Zwei Hunde spielen.")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert len(out) == 2 and all(line.strip() for line in out)
    r = cli("translate", "--checkpoint", ckpt, "--beam-size", 1, input="Ein Hund läuft.\n\nEine Quokkaxyz singt.\n")
    assert r.returncode == 0, r.stderr
    out = r.stdout.split("\n")
    assert out[-1] == "" and len(out) == 4 and out[1] == "" and out[0] and out[2]   # empty line → empty line


@needs_data
def test_translate_truncates_long_input_with_a_warning(trained):
    _, res, _ = trained
    r = cli("translate", "--checkpoint", res["checkpoint"], "--beam-size", 1, "Hund " * 1100)
    assert r.returncode == 0, r.stderr
    assert "warning: sentence 1 is longer than the model's maximum of 1024 tokens" in r.stderr
    assert len(r.stdout.splitlines()) == 1


@needs_data
def test_translate_refuses_undecodable_stdin(trained):
    _, res, _ = trained
    r = cli("translate", "--checkpoint", res["checkpoint"], input=b"Ein Hund.\nkaputt \xff\xfe\n")
    assert r.returncode == 1
    assert "stdin line 2: bytes that are not UTF-8" in r.stderr.decode()


@needs_data
def test_evaluate_prints_bleu_and_signature(trained):
    _, res, _ = trained
    r = cli("evaluate", "--checkpoint", res["checkpoint"], "--split", "test_2017_mscoco", "--beam-size", 2)
    assert r.returncode == 0, r.stderr
    assert "test_2017_mscoco: BLEU = " in r.stdout and "nrefs:1|case:mixed|eff:no|tok:13a" in r.stdout
    r = subprocess.run([sys.executable, "-m", "annotated_transformer", "evaluate", "--checkpoint", res["checkpoint"],
                        "--split", "test_2017_mscoco", "--beam-size", "2", "--json"], capture_output=True, text=True, env=env())
    assert r.returncode == 0, r.stderr
    j = last_json(r.stdout)
    assert j["split"] == "test_2017_mscoco" and j["sentences"] == 461 and 0 <= j["bleu"] <= 100 and "tok:13a" in j["signature"]


@needs_data
def test_average_and_refusals(trained, tmp_path):
    run, res, _ = trained
    steps = sorted(run.glob("step_*.pt"))
    out = tmp_path / "avg.pt"
    r = cli("average", *steps[-2:], "--output", out)
    assert r.returncode == 0 and out.exists(), r.stderr
    r = cli("translate", "--checkpoint", out, "--beam-size", 1, "Ein Hund.")
    assert r.returncode == 0 and r.stdout.strip(), r.stderr
    r = cli("train", "--preset", "tiny", "--max-steps", 1, "--checkpoint-dir", run)       # a second run in the same dir
    assert r.returncode == 1 and "already holds checkpoints" in r.stderr and "--resume" in r.stderr
    r = cli("translate", "--checkpoint", tmp_path / "nope.pt", "x")
    assert r.returncode == 1 and "nope.pt does not exist" in r.stderr


# --- data errors: each names the file(s) ---------------------------------------------------------------

def write_split(folder, split, de_lines, en_lines, gz=True):
    folder.mkdir(parents=True, exist_ok=True)
    for lang, lines in (("de", de_lines), ("en", en_lines)):
        data = lines if isinstance(lines, bytes) else ("\n".join(lines) + "\n").encode()
        if gz: (folder / f"{split}.{lang}.gz").write_bytes(gzip.compress(data))
        else: (folder / f"{split}.{lang}").write_bytes(data)


def test_mismatched_line_counts(tmp_path):
    root = tmp_path / "data"
    write_split(root / "multi30k", "train", ["Ein Hund.", "Eine Katze.", "Ein Pferd."], ["A dog.", "A cat."])
    write_split(root / "multi30k", "val", ["Ein Hund."], ["A dog."], gz=False)
    write_split(root / "multi30k", "test_2016_flickr", ["Ein Hund."], ["A dog."])
    r = cli("train", "--preset", "tiny", "--max-steps", 1, "--checkpoint-dir", tmp_path / "ck", "--data-dir", root)
    assert r.returncode == 1
    assert "train.de.gz has 3 lines" in r.stderr and "train.en.gz has 2" in r.stderr, r.stderr


def test_undecodable_bytes_name_file_and_line(tmp_path):
    folder = tmp_path / "m30k"
    write_split(folder, "train", ["Ein Hund.", "Eine Katze."], b"A dog.\nA \xe9cat.\n")
    write_split(folder, "val", ["Ein Hund."], ["A dog."])
    write_split(folder, "test_2016_flickr", ["Ein Hund."], ["A dog."])
    r = cli("train", "--preset", "tiny", "--max-steps", 1, "--checkpoint-dir", tmp_path / "ck", "--data-dir", folder)
    assert r.returncode == 1
    assert "train.en.gz, line 2: bytes that are not UTF-8" in r.stderr, r.stderr


def test_missing_files_offline_one_error_naming_all(tmp_path):
    "No data root configured, an empty cache and no network (a URL that cannot be fetched): one error, every file."
    r = cli("train", "--preset", "tiny", "--max-steps", 1, "--checkpoint-dir", tmp_path / "ck",
            ANNOTATED_TRANSFORMER_DATA=None, XDG_CACHE_HOME=tmp_path / "cache",
            ANNOTATED_TRANSFORMER_DATA_URL=(tmp_path / "offline").as_uri())
    assert r.returncode == 1
    err = r.stderr
    for name in ("train.de.gz", "train.en.gz", "val.de.gz", "val.en.gz", "test_2016_flickr.de.gz", "test_2016_flickr.en.gz"):
        assert name in err, (name, err)
    assert str(tmp_path / "cache") in err and "ANNOTATED_TRANSFORMER_DATA" in err
    assert err.count("error:") == 1


def test_wrong_data_root(tmp_path):
    (tmp_path / "empty").mkdir()
    r = cli("evaluate", "--checkpoint", tmp_path / "x.pt", "--data-dir", tmp_path / "empty")
    assert r.returncode == 1 and "holds neither a multi30k/ folder nor Multi30k files" in r.stderr
    partial = tmp_path / "partial"
    write_split(partial, "train", ["Ein Hund."], ["A dog."])
    r = cli("evaluate", "--checkpoint", tmp_path / "x.pt", "--data-dir", partial, "--split", "val")
    assert r.returncode == 1 and "lacks val.de.gz, val.en.gz" in r.stderr
    r = cli("evaluate", "--checkpoint", tmp_path / "x.pt", "--split", "test2016")
    assert r.returncode == 1 and "unknown Multi30k split 'test2016'" in r.stderr


def test_empty_file(tmp_path):
    folder = tmp_path / "m30k"
    write_split(folder, "train", b"", b"")
    write_split(folder, "val", ["Ein Hund."], ["A dog."])
    write_split(folder, "test_2016_flickr", ["Ein Hund."], ["A dog."])
    r = cli("train", "--preset", "tiny", "--max-steps", 1, "--checkpoint-dir", tmp_path / "ck", "--data-dir", folder)
    assert r.returncode == 1 and "train.de.gz is empty" in r.stderr, r.stderr
