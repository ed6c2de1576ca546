"""The main job from the command line: train a tiny model, translate, evaluate, average, resume; and the data errors a
user can run into (mismatched files, bad bytes, missing files offline).

Two kinds of tests:
- on the Tatoeba sample that ships with the package (`annotated_transformer.data.SAMPLE_DIR`): they always run, with no
  data root, an empty cache and a download URL that cannot be reached — a fresh clone with no network passes them;
- on Multi30k itself, from the data root in $ANNOTATED_TRANSFORMER_DATA (the only place it comes from): without it they
  skip, saying why — except under CI=true, where a missing data root is a failure, never a silent skip."""
import csv, gzip, json, os, shutil, subprocess, sys
from pathlib import Path
import pytest
from annotated_transformer.decoding import SearchOptions
from annotated_transformer.data import SAMPLE_DIR, SAMPLE_SPLITS, load_split
from annotated_transformer.checkpoints import load_checkpoint

EXE = Path(sys.executable).parent / "annotated-transformer"
DATA_ENV, URL_ENV = "ANNOTATED_TRANSFORMER_DATA", "ANNOTATED_TRANSFORMER_DATA_URL"
DATA = Path(os.environ[DATA_ENV]) if os.environ.get(DATA_ENV) else None
IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def need_multi30k() -> Path:
    "The data root holding Multi30k. Without one: skip with the reason, or fail under CI=true (CI must run these)."
    if DATA is None:
        why = f"${DATA_ENV} is not set, so Multi30k is not available"
        if IN_CI: pytest.fail(f"CI=true but {why}: CI must run the full-data tests; set ${DATA_ENV} to the data root "
                              f"(a folder holding multi30k/)", pytrace=False)
        pytest.skip(f"{why} (set ${DATA_ENV} to a data root holding multi30k/ to run the full-data tests)")
    if not any((d / "train.de.gz").exists() for d in (DATA / "multi30k", DATA)):
        pytest.fail(f"${DATA_ENV}={DATA} holds no Multi30k (neither {DATA}/multi30k/train.de.gz nor {DATA}/train.de.gz)",
                    pytrace=False)
    return DATA


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    "Environment of a machine with no data: no data root, an empty cache, a download URL that cannot be reached."
    d = tmp_path_factory.mktemp("offline")
    return {DATA_ENV: None, "XDG_CACHE_HOME": d / "cache", URL_ENV: (d / "no-such-mirror").as_uri()}


def env(**kw):
    e = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
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


# --- on the shipped sample: always ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained(tmp_path_factory, offline):
    "Train the tiny recipe on the sample's 1,600 training pairs for 200 updates (well under a minute), offline."
    run = tmp_path_factory.mktemp("run") / "tiny"
    r = cli("train", "--task", "multi30k", "--recipe", "tiny", "--data-dir", SAMPLE_DIR, "--max-steps", 200,
            "--save-every", 40, "--beam-size", 1, "--checkpoint-dir", run, "--json", **offline)
    assert r.returncode == 0, r.stderr[-3000:]
    return run, last_json(r.stdout), r


def test_train_on_the_sample_offline(trained, offline):
    run, res, r = trained
    assert res["updates"] == 200 and res["train_pairs"] == SAMPLE_SPLITS["train"]
    assert res["evaluated"] == ["val", "test"] and Path(res["data"]) == SAMPLE_DIR   # the sample's own test split
    assert res["train_loss_end"] < res["train_loss_start"] - 1.5, res
    for k in ("val_bleu", "test_bleu"): assert 0 <= res[k] <= 100
    assert "tok:13a" in res["signature"] and "case:mixed" in res["signature"]
    assert len(res["averaged"]) == 5 and (run / "averaged.pt").exists()
    assert res["selected"] in ("averaged", "last") and "val_bleu_averaged" in res and "val_bleu_last" in res
    assert Path(res["checkpoint"]).exists()
    assert "train" in r.stderr                                # the progress bar went to stderr
    assert not list(Path(offline["XDG_CACHE_HOME"]).glob("**/*.gz"))   # nothing was downloaded


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


def test_translate_truncates_long_input_with_a_warning(trained):
    _, res, _ = trained
    r = cli("translate", "--checkpoint", res["checkpoint"], "--beam-size", 1, "Hund " * 1100)
    assert r.returncode == 0, r.stderr
    assert "warning: sentence 1 is longer than the model's maximum of 1024 tokens" in r.stderr
    assert len(r.stdout.splitlines()) == 1


def test_translate_refuses_undecodable_stdin(trained):
    _, res, _ = trained
    r = cli("translate", "--checkpoint", res["checkpoint"], input=b"Ein Hund.\nkaputt \xff\xfe\n")
    assert r.returncode == 1
    assert "stdin line 2: bytes that are not UTF-8" in r.stderr.decode()


def test_evaluate_on_the_sample(trained, offline):
    _, res, _ = trained
    r = cli("evaluate", "--checkpoint", res["checkpoint"], "--data-dir", SAMPLE_DIR, "--split", "test", "--beam-size", 1,
            "--json", **offline)
    assert r.returncode == 0, r.stderr
    j = last_json(r.stdout)
    assert j["split"] == "test" and j["sentences"] == SAMPLE_SPLITS["test"] and 0 <= j["bleu"] <= 100
    assert "nrefs:1|case:mixed|eff:no|tok:13a" in j["signature"]


def test_both_directions_recorded_and_enforced(trained, tmp_path, offline):
    "--src en --tgt de trains the paper's direction; a model is never used the other way round."
    _, res, _ = trained
    assert (res["src"], res["tgt"]) == ("de", "en")                         # the default direction
    r = cli("translate", "--checkpoint", res["checkpoint"], "--src", "en", "A dog.")
    assert r.returncode == 1 and "translates de→en, not en→de" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    run = tmp_path / "en-de"
    r = cli("train", "--recipe", "tiny", "--data-dir", SAMPLE_DIR, "--src", "en", "--max-steps", 4, "--save-every", 2,
            "--max-train-pairs", 200, "--beam-size", 1, "--checkpoint-dir", run, "--json", **offline)
    assert r.returncode == 0, r.stderr[-2000:]
    j = last_json(r.stdout)
    assert (j["src"], j["tgt"]) == ("en", "de")
    assert j["examples"][0]["source"] == load_split("test", SAMPLE_DIR, src="en", tgt="de")[0][0]   # English sources
    r = cli("evaluate", "--checkpoint", j["checkpoint"], "--data-dir", SAMPLE_DIR, "--tgt", "en", "--max-sentences", 2, **offline)
    assert r.returncode == 1 and "translates en→de, not de→en" in r.stderr
    r = cli("evaluate", "--checkpoint", j["checkpoint"], "--data-dir", SAMPLE_DIR, "--split", "test", "--max-sentences", 3,
            "--beam-size", 1, "--json", **offline)
    assert r.returncode == 0, r.stderr[-2000:]
    e = last_json(r.stdout)
    assert (e["src"], e["tgt"], e["split"], e["sentences"]) == ("en", "de", "test", 3) and 0 <= e["chrf"] <= 100
    r = cli("train", "--recipe", "tiny", "--data-dir", SAMPLE_DIR, "--src", "de", "--max-steps", 6, "--resume",
            "--checkpoint-dir", run, **offline)
    assert r.returncode == 1 and "translates en→de, not de→en" in r.stderr
    r = cli("train", "--recipe", "tiny", "--data-dir", SAMPLE_DIR, "--src", "en", "--tgt", "en", "--max-steps", 1,
            "--checkpoint-dir", tmp_path / "x", **offline)
    assert r.returncode == 1 and "cannot translate en→en" in r.stderr


def test_bpe_vocab_size_sets_the_vocabulary(tmp_path, offline):
    "--bpe-vocab-size N: a new run learns a joint BPE vocabulary of N ids, and its recipe says so."
    from annotated_transformer.multi30k import codec_from_file
    run = tmp_path / "v300"
    r = cli("train", "--recipe", "tiny", "--data-dir", SAMPLE_DIR, "--bpe-vocab-size", 300, "--max-steps", 1,
            "--max-train-pairs", 200, "--beam-size", 1, "--checkpoint-dir", run, "--json", **offline)
    assert r.returncode == 0, r.stderr[-2000:]
    codec = codec_from_file(run / "vocab.json", "de", "en")
    assert (codec.kind, codec.src_vocab_size, codec.tgt_vocab_size) == ("bpe", 300, 300)
    assert last_json(r.stdout)["recipe"]["bpe_vocab_size"] == 300
    r = cli("train", "--recipe", "tiny", "--data-dir", SAMPLE_DIR, "--vocab", run / "vocab.json", "--max-steps", 1,
            "--max-train-pairs", 200, "--beam-size", 1, "--checkpoint-dir", tmp_path / "again", "--json", **offline)
    assert r.returncode == 0, r.stderr[-2000:]
    assert last_json(r.stdout)["recipe"]["bpe_vocab_size"] == 300       # a vocabulary file's size, not tiny's 2000
    r = cli("train", "--bpe-vocab-size", 300, "--vocab", "word", "--max-steps", 1, **offline)
    assert r.returncode == 2 and "--bpe-vocab-size sets a BPE vocabulary" in r.stderr


def test_average_and_refusals(trained, tmp_path, offline):
    run, res, _ = trained
    steps = sorted(run.glob("step_*.pt"))
    out = tmp_path / "avg.pt"
    r = cli("average", *steps[-2:], "--output", out)
    assert r.returncode == 0 and out.exists(), r.stderr
    r = cli("translate", "--checkpoint", out, "--beam-size", 1, "Ein Hund.")
    assert r.returncode == 0 and r.stdout.strip(), r.stderr
    r = cli("train", "--recipe", "tiny", "--max-steps", 1, "--checkpoint-dir", run, "--data-dir", SAMPLE_DIR, **offline)
    assert r.returncode == 1 and "already holds checkpoints" in r.stderr and "--resume" in r.stderr   # a second run, same dir
    r = cli("translate", "--checkpoint", tmp_path / "nope.pt", "x")
    assert r.returncode == 1 and "nope.pt does not exist" in r.stderr


@pytest.mark.parametrize("flags, says", [
    (["--lr-scale", "1.0"], "--lr-scale 0.5 in the checkpoint vs 1.0 here"),
    (["--warmup-steps", "50"], "--warmup-steps 200 in the checkpoint vs 50 here"),
    (["--recipe", "small", "--seed", "0"], "--recipe tiny in the checkpoint vs small here"),
    (["--seed", "7", "--lr-scale", "2"], "--seed 0 in the checkpoint vs 7 here; --lr-scale 0.5 in the checkpoint vs 2.0 here"),
    (["--clip-grad", "1"], "--clip-grad none in the checkpoint vs 1.0 here"),   # tiny does not clip
    (["--bpe-vocab-size", "500"], "--bpe-vocab-size 2000 in the checkpoint vs 500 here"),
])
def test_resume_refuses_a_different_recipe(trained, offline, flags, says):
    "--resume keeps the run's recipe: asking for another value is refused, naming every flag and both values."
    run, _, _ = trained
    before = sorted(p.name for p in run.iterdir())
    r = cli("train", "--resume", "--checkpoint-dir", run, "--data-dir", SAMPLE_DIR, "--max-steps", 210, *flags, **offline)
    assert r.returncode == 1, r.stderr
    assert says in r.stderr and "another recipe" in r.stderr, r.stderr
    assert r.stderr.count("error") == 1 and "Traceback" not in r.stderr
    assert sorted(p.name for p in run.iterdir()) == before                   # nothing written


def test_the_recipe_name_is_recorded(tmp_path, offline):
    "A run's results and checkpoints name its recipe under recipe_name, beside the recipe itself."
    r = cli("train", "--recipe", "tiny", "--data-dir", SAMPLE_DIR, "--max-train-pairs", 200, "--max-steps", 2, "--save-every", 1,
            "--beam-size", 1, "--checkpoint-dir", tmp_path / "run", "--json", **offline)
    assert r.returncode == 0, r.stderr[-2000:]
    res = last_json(r.stdout)
    assert res["recipe_name"] == "tiny" and res["recipe"]["model"] == "tiny"
    extra = load_checkpoint(tmp_path / "run" / "step_00000002.pt")["extra"]
    assert extra["recipe_name"] == "tiny" and "preset" not in extra


def test_resume_applies_steps_and_save_interval(trained, offline, tmp_path):
    "--max-steps and --save-every may change on resume, and are applied; the recipe's own values stay."
    run, res, _ = trained
    copy = tmp_path / "tiny"
    shutil.copytree(run, copy)
    r = cli("train", "--resume", "--checkpoint-dir", copy, "--data-dir", SAMPLE_DIR, "--max-steps", 210, "--save-every", 5,
            "--beam-size", 1, "--lr-scale", "0.5", "--json", **offline)
    assert r.returncode == 0, r.stderr[-3000:]
    j = last_json(r.stdout)
    assert j["updates"] == 210 and j["recipe"]["save_every"] == 5 and j["recipe"]["lr_scale"] == 0.5
    assert j["averaged"][-3:] == ["step_00000200.pt", "step_00000205.pt", "step_00000210.pt"]
    assert {k: v for k, v in j["recipe"].items() if k != "save_every"} == {k: v for k, v in res["recipe"].items() if k != "save_every"}


def test_resume_with_more_updates_moves_the_cooldown(tmp_path, offline):
    "A run resumed with more updates cools down at its new end (and says so), not at 0 after the old one."
    run, common = tmp_path / "run", ["--recipe", "tiny", "--cooldown", "0.5", "--data-dir", SAMPLE_DIR,
                                     "--max-train-pairs", 200, "--save-every", 2, "--beam-size", 1, "--json"]
    r = cli("train", *common, "--max-steps", 4, "--checkpoint-dir", run, **offline)
    assert r.returncode == 0, r.stderr[-2000:]
    r = cli("train", "--resume", *common, "--max-steps", 8, "--checkpoint-dir", run, **offline)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout + r.stderr
    assert "over the last 4 updates of 8 (the checkpoint planned the last 2 of 4" in out, out[-2000:]
    rows = list(csv.DictReader((run / "history.csv").open()))
    lr = {int(row["step"]): float(row["learning_rate"]) for row in rows}
    assert sorted(lr) == list(range(1, 9)) and lr[4] > 0 and all(lr[s] > 0 for s in range(5, 9)), lr
    assert lr[8] < lr[5]                                  # falling over the new cooldown


# --- on Multi30k: with the data root; a failure under CI=true without it ---------------------------------

@pytest.fixture(scope="module")
def trained_multi30k(tmp_path_factory):
    "Train the tiny recipe on the first 2,000 Multi30k training pairs for 300 updates (about a minute)."
    root = need_multi30k()
    run = tmp_path_factory.mktemp("run") / "tiny"
    r = cli("train", "--task", "multi30k", "--recipe", "tiny", "--max-train-pairs", 2000, "--max-steps", 300,
            "--save-every", 60, "--beam-size", 1, "--checkpoint-dir", run, "--json", **{DATA_ENV: root})
    assert r.returncode == 0, r.stderr[-3000:]
    return run, last_json(r.stdout), r


def test_multi30k_train_loss_drops_and_reports_bleu(request):
    need_multi30k()
    run, res, r = request.getfixturevalue("trained_multi30k")
    assert res["updates"] == 300 and res["train_pairs"] == 2000
    sets = ["val", "test_2016_flickr", "test_2017_flickr", "test_2017_mscoco", "test_2018_flickr", "tatoeba"]
    assert res["evaluated"] == sets                       # every test set in the data root, and the out-of-domain one
    assert [r["set"] for r in res["scores"]] == sets and [r["sentences"] for r in res["scores"]] == [1014, 1000, 1000, 461, 1071, 2196]
    assert res["train_loss_end"] < res["train_loss_start"] - 1.5, res
    for k in sets: assert 0 <= res[f"{k}_bleu"] <= 100 and 0 <= res[f"{k}_chrf"] <= 100
    assert "tok:13a" in res["signature"] and "case:mixed" in res["signature"]
    assert len(res["averaged"]) == 5 and (run / "averaged.pt").exists()


def test_multi30k_evaluate_prints_bleu_and_signature(request):
    root = need_multi30k()
    _, res, _ = request.getfixturevalue("trained_multi30k")
    r = cli("evaluate", "--checkpoint", res["checkpoint"], "--split", "test_2017_mscoco", "--beam-size", 2, **{DATA_ENV: root})
    assert r.returncode == 0, r.stderr
    assert "| test_2017_mscoco | 461 | " in r.stdout and "nrefs:1|case:mixed|eff:no|tok:13a" in r.stdout and "chrF2: " in r.stdout
    r = subprocess.run([sys.executable, "-m", "annotated_transformer", "evaluate", "--checkpoint", res["checkpoint"],
                        "--split", "test_2017_mscoco", "--beam-size", "2", "--json"], capture_output=True, text=True,
                       env=env(**{DATA_ENV: root}))
    assert r.returncode == 0, r.stderr
    j = last_json(r.stdout)
    assert j["split"] == "test_2017_mscoco" and j["sentences"] == 461 and 0 <= j["bleu"] <= 100 and "tok:13a" in j["signature"]


# --- data errors: each names the file(s); no data needed ---------------------------------------------------

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
    r = cli("train", "--recipe", "tiny", "--max-steps", 1, "--checkpoint-dir", tmp_path / "ck", "--data-dir", root)
    assert r.returncode == 1
    assert "train.de.gz has 3 lines" in r.stderr and "train.en.gz has 2" in r.stderr, r.stderr


def test_undecodable_bytes_name_file_and_line(tmp_path):
    folder = tmp_path / "m30k"
    write_split(folder, "train", ["Ein Hund.", "Eine Katze."], b"A dog.\nA \xe9cat.\n")
    write_split(folder, "val", ["Ein Hund."], ["A dog."])
    write_split(folder, "test_2016_flickr", ["Ein Hund."], ["A dog."])
    r = cli("train", "--recipe", "tiny", "--max-steps", 1, "--checkpoint-dir", tmp_path / "ck", "--data-dir", folder)
    assert r.returncode == 1
    assert "train.en.gz, line 2: bytes that are not UTF-8" in r.stderr, r.stderr


def test_missing_files_offline_one_error_naming_all(tmp_path):
    "No data root configured, an empty cache and no network (a URL that cannot be fetched): one error, every file."
    mirror = (tmp_path / "offline").as_uri()
    r = cli("train", "--recipe", "tiny", "--max-steps", 1, "--checkpoint-dir", tmp_path / "ck",
            **{DATA_ENV: None, "XDG_CACHE_HOME": tmp_path / "cache", URL_ENV: mirror})
    assert r.returncode == 1
    err = r.stderr
    for name in ("train.de.gz", "train.en.gz", "val.de.gz", "val.en.gz", "test_2016_flickr.de.gz", "test_2016_flickr.en.gz"):
        assert name in err, (name, err)
    assert str(tmp_path / "cache") in err and DATA_ENV in err
    assert f"could not be downloaded from {mirror}/" in err          # where it tried
    assert f"set ${URL_ENV} to another host" in err and "file://" in err   # how to point the downloader elsewhere
    assert err.count("error:") == 1


def test_wrong_data_root(tmp_path):
    (tmp_path / "empty").mkdir()
    r = cli("evaluate", "--checkpoint", tmp_path / "x.pt", "--data-dir", tmp_path / "empty")
    assert r.returncode == 1 and "holds neither a multi30k/ folder nor Multi30k files" in r.stderr
    partial = tmp_path / "partial"
    write_split(partial, "train", ["Ein Hund."], ["A dog."])
    r = cli("evaluate", "--checkpoint", tmp_path / "x.pt", "--data-dir", partial, "--split", "val")
    assert r.returncode == 1 and "lacks val.de.gz, val.en.gz" in r.stderr
    assert URL_ENV in r.stderr and DATA_ENV in r.stderr                      # ...and how to get them
    r = cli("evaluate", "--checkpoint", tmp_path / "x.pt", "--data-dir", SAMPLE_DIR, "--split", "test2016")
    assert r.returncode == 1 and "unknown Multi30k split 'test2016'" in r.stderr


def test_empty_file(tmp_path):
    folder = tmp_path / "m30k"
    write_split(folder, "train", b"", b"")
    write_split(folder, "val", ["Ein Hund."], ["A dog."])
    write_split(folder, "test_2016_flickr", ["Ein Hund."], ["A dog."])
    r = cli("train", "--recipe", "tiny", "--max-steps", 1, "--checkpoint-dir", tmp_path / "ck", "--data-dir", folder)
    assert r.returncode == 1 and "train.de.gz is empty" in r.stderr, r.stderr


@pytest.mark.parametrize("flags, want", [([], ("de", "en")), (["--tgt", "de"], ("en", "de")), (["--src", "en"], ("en", "de")),
                                         (["--tgt", "en"], ("de", "en")), (["--src", "de"], ("de", "en"))])
def test_one_default_direction_names_the_folder(flags, want, tmp_path, monkeypatch):
    "`train --tgt de` plans and writes checkpoints/DATA-RECIPE-en-de: the CLI's check and the run agree (no training)."
    from types import SimpleNamespace
    import torch
    from annotated_transformer.cli import build_parser
    from annotated_transformer.cli_train import _default_checkpoint_dir
    from annotated_transformer.multi30k import prepare_run, RunOptions
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["train", "--recipe", "tiny", "--data-dir", str(SAMPLE_DIR), *flags])
    planned = _default_checkpoint_dir(args, exists=False)                   # what the command line checks first
    options = RunOptions("tiny", data_dir=str(SAMPLE_DIR), max_train_pairs=50, src=args.src, tgt=args.tgt,
                         evaluate_splits=("val",))
    run = prepare_run(SimpleNamespace(device=torch.device("cpu"), is_main=True), options, {}, lambda m: None)  # what it writes to
    assert (run.src, run.tgt) == want
    # named after the data it trains on: the shipped Tatoeba sample, not Multi30k (issue 42)
    assert run.ckpt_dir == planned == Path("checkpoints/tatoeba-de-en-tiny" + ("" if want == ("de", "en") else "-en-de"))


def test_default_direction_is_one_rule():
    from annotated_transformer.data import default_direction
    assert default_direction(None, None) == ("de", "en")
    assert default_direction(None, "de") == default_direction("en", None) == ("en", "de")
    assert default_direction("de", None) == default_direction(None, "en") == ("de", "en")
    assert default_direction("pt", "es") == ("pt", "es") and default_direction("de", "de") == ("de", "de")  # given: as given
    for src, tgt in (("fr", None), (None, "pt_br")):
        with pytest.raises(ValueError, match="give both"): default_direction(src, tgt)


def test_nbest_progress_bar_reaches_the_end(capsys):
    "translate --n-best: the bar counts every sentence it decoded (3/3), blank lines aside."
    import torch
    from annotated_transformer.data import BPECodec
    from annotated_transformer.model import create_transformer
    from annotated_transformer.evaluation import translate_nbest
    codec = BPECodec.build(load_split("train", SAMPLE_DIR, 200, download=False), vocab_size=300)
    torch.manual_seed(0)
    m = create_transformer(codec.src_vocab_size, codec.tgt_vocab_size, "tiny", share_embeddings=True, max_len=24).eval()
    out = translate_nbest(m, codec, ["Hallo.", "", "Wie geht es dir?", "Gut."], SearchOptions(n_best=2, beam_size=2), progress=True)
    assert [len(o) for o in out] == [2, 0, 2, 2]
    bar = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert "3/3" in bar, bar
