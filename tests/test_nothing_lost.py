"""Nothing lost, nothing stale (issue 42): the faults a new user met, each checked where it bit.

1. `translate --input F --output O` stopped by Ctrl-C keeps the finished lines, in input order up to the first
   unfinished one, in `O.partial`, never a part under `O` itself, and says how many and where;
2. history.csv reaches the disk as training goes, and a resumed run cuts it back to its checkpoint, then appends;
3. a beam wider than the target vocabulary is refused in one line naming both numbers; the help says what a beam
   costs in memory;
10. one definition of CI: the workflow runs `.ci/run`; the library does not look at `CI`, the test configuration does.

The translate checks run `cli.main` in process with a tiny untrained model (a stop is a KeyboardInterrupt raised from
inside the search, at a chosen batch); the training checks run the console script and send it real signals.
"""
import json, os, re, shlex, signal, subprocess, sys, time
from pathlib import Path

import pytest
import torch

from annotated_transformer.cli import build_parser
from annotated_transformer.data import build_codec, find_multi30k, DATA_ENV
from annotated_transformer.model import create_transformer
from annotated_transformer.training import TrainState
from annotated_transformer.checkpoints import save_checkpoint, latest_checkpoint
from cli_run import run_main, messages, stop_at_batch

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).parent / "annotated-transformer")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


WORDS = ["Hund", "Mann", "Frau", "Kind", "Park", "Buch", "Schnee", "Fußball", "liest", "läuft", "spielt"]


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory):
    "An untrained tiny translation model with a word vocabulary (fast to decode, 30-odd target tokens)."
    pairs = [("Ein Hund läuft im Park.", "A dog runs in the park."), ("Zwei Männer spielen Fußball.", "Two men play soccer."),
             ("Eine Frau liest ein Buch.", "A woman reads a book."), ("Ein Kind spielt im Schnee.", "A child plays in the snow.")] * 2
    codec = build_codec(pairs)
    torch.manual_seed(0)
    m = create_transformer(codec.src_vocab_size, codec.tgt_vocab_size, "tiny", max_len=40)
    d = tmp_path_factory.mktemp("tiny")
    return save_checkpoint(d / "mt.pt", m, train_state=TrainState(), extra={"task": "multi30k", "vocab": codec.to_dict()}), codec


def input_lines() -> list[str]:
    "40 lines: the first six one word long (so they finish in the first batches), the rest 3 to 9 words."
    import random
    rng = random.Random(0)
    return [WORDS[i] for i in range(6)] + [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) for _ in range(34)]


# --------------------------------------------------------------------------------------------------------------
# 1. translate, stopped
# --------------------------------------------------------------------------------------------------------------

def test_stopped_translate_keeps_the_finished_lines_in_partial(tiny_ckpt, tmp_path, monkeypatch, capsys):
    ckpt, _ = tiny_ckpt
    src = tmp_path / "in.de"
    lines = input_lines()
    src.write_text("".join(l + "\n" for l in lines), encoding="utf-8")
    args = ["translate", "--checkpoint", ckpt, "--input", src, "--beam-size", 2, "--batch-size", 4, "--device", "cpu"]
    rc, out, err = run_main(capsys, *args, "--output", tmp_path / "whole.en")                 # uninterrupted
    assert rc == 0, err
    whole = (tmp_path / "whole.en").read_text(encoding="utf-8").splitlines()
    assert len(whole) == len(lines)

    out_path = tmp_path / "out.en"
    stop_at_batch(monkeypatch, 4)                                 # three batches (12 sentences) done, the fourth cut
    rc, out, err = run_main(capsys, *args, "--output", out_path)
    monkeypatch.undo()
    assert rc == 130, err
    assert not out_path.exists()                                  # never a part under the output's own name
    partial = Path(f"{out_path}.partial")
    kept = partial.read_text(encoding="utf-8").splitlines()
    assert 6 <= len(kept) < 12                                    # the one-word lines, then up to the first unfinished
    assert kept == whole[:len(kept)]                              # the same lines, in input order
    msg = messages(err)
    assert msg == [f"annotated-transformer translate: stopped by SIGINT; the first {len(kept)} of {len(lines)} lines "
                   f"are translated in {partial}; {out_path} was not written"], err


def test_stopped_translate_leaves_an_earlier_output_untouched(tiny_ckpt, tmp_path, monkeypatch, capsys):
    ckpt, _ = tiny_ckpt
    src, out_path = tmp_path / "in.de", tmp_path / "out.en"
    src.write_text("".join(l + "\n" for l in input_lines()), encoding="utf-8")
    out_path.write_text("an earlier, complete translation\n", encoding="utf-8")
    stop_at_batch(monkeypatch, 2)
    rc, _, err = run_main(capsys, "translate", "--checkpoint", ckpt, "--input", src, "--batch-size", 4, "--beam-size", 1,
                          "--output", out_path, "--device", "cpu")
    assert rc == 130, err
    assert out_path.read_text(encoding="utf-8") == "an earlier, complete translation\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.de", "out.en", "out.en.partial"]    # no temporary file left


def test_stopped_nbest_to_stdout_says_what_was_written(tiny_ckpt, tmp_path, monkeypatch, capsys):
    "To stdout the finished lines go at once, and the message counts them; n-best rows belong to their input line."
    ckpt, _ = tiny_ckpt
    src = tmp_path / "in.de"
    src.write_text("".join(l + "\n" for l in input_lines()), encoding="utf-8")
    stop_at_batch(monkeypatch, 3)
    rc, out, err = run_main(capsys, "translate", "--checkpoint", ckpt, "--input", src, "--batch-size", 4, "--n-best", 2,
                            "--beam-size", 2, "--device", "cpu")
    assert rc == 130, err
    done = sorted({int(r.split("\t")[0]) for r in out.splitlines()})
    assert done == list(range(1, len(done) + 1)) and len(done) >= 6
    assert messages(err) == [f"annotated-transformer translate: stopped by SIGINT; the first {len(done)} of 40 lines "
                             f"were written to stdout"], err


# --------------------------------------------------------------------------------------------------------------
# 3. a beam wider than the vocabulary
# --------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["translate", "evaluate"])
def test_a_beam_wider_than_the_vocabulary_is_refused(tiny_ckpt, tmp_path, capsys, command):
    ckpt, codec = tiny_ckpt
    V = codec.tgt_vocab_size
    (tmp_path / "t.de").write_text("Ein Hund.\n", encoding="utf-8"); (tmp_path / "t.en").write_text("A dog.\n", encoding="utf-8")
    what = ["Ein Hund."] if command == "translate" else ["--test", tmp_path / "t"]
    rc, out, err = run_main(capsys, command, "--checkpoint", ckpt, "--beam-size", 100000, "--device", "cpu", *what)
    assert (rc, out) == (1, ""), err
    assert messages(err) == [f"annotated-transformer {command}: error: --beam-size 100000 is larger than the model's "
                             f"target vocabulary of {V} tokens: use at most {V}"], err
    rc, out, err = run_main(capsys, command, "--checkpoint", ckpt, "--beam-size", V, "--device", "cpu", *what)
    assert rc == 0, err                                                        # as wide as the vocabulary: fine


def test_nbest_wider_than_the_vocabulary_names_n_best(tiny_ckpt, capsys):
    ckpt, codec = tiny_ckpt
    V = codec.tgt_vocab_size
    rc, out, err = run_main(capsys, "translate", "--checkpoint", ckpt, "--n-best", V + 1, "Ein Hund.")
    assert rc == 1 and f"--n-best {V + 1} is larger than the model's target vocabulary of {V} tokens" in err, err


@pytest.mark.parametrize("command", ["translate", "evaluate"])
def test_the_help_says_what_a_beam_costs(command):
    text = " ".join(build_parser().commands[command].format_help().split())
    assert re.search(r"--beam-size BEAM_SIZE .*memory grows with .*beam.*batch", text), text
    assert "at most the target vocabulary" in text, text


# --------------------------------------------------------------------------------------------------------------
# 10. one definition of CI
# --------------------------------------------------------------------------------------------------------------

def test_the_workflow_runs_ci_run():
    "The workflow's test job runs .ci/run (one definition of 'the tests pass'), hides no failure, names no stale helper."
    text = (ROOT / ".github/workflows/test.yaml").read_text(encoding="utf-8")
    runs = [l.split("run:", 1)[1].strip() for l in text.splitlines() if l.strip().startswith(("run:", "- run:"))]
    assert "bash .ci/run" in runs, runs
    assert "|| true" not in text and "ensure_multi30k" not in text
    assert "ANNOTATED_TRANSFORMER_DATA" in text                         # the data root is set


def test_the_library_does_not_look_at_ci(tmp_path, monkeypatch):
    "A user's own CI (CI=true, no data root) gets what any machine gets: None, and the sample serves."
    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert find_multi30k(quiet=True) is None


def test_the_test_configuration_refuses_ci_without_a_data_root(tmp_path):
    "The project's rule (CI runs the full-data checks) lives in tests/conftest.py: pytest under CI=true needs a data root."
    env = {k: v for k, v in ENV.items() if k != DATA_ENV}
    r = subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider", "--co", "-q",
                        "tests/test_nothing_lost.py::test_the_workflow_runs_ci_run"],
                       capture_output=True, text=True, cwd=ROOT, env={**env, "CI": "true"}, timeout=300)
    assert r.returncode != 0 and f"CI=true but ${DATA_ENV} is not set" in r.stdout + r.stderr, r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider", "--co", "-q",
                        "tests/test_nothing_lost.py::test_the_workflow_runs_ci_run"],
                       capture_output=True, text=True, cwd=ROOT, env={**env, "CI": ""}, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


# --------------------------------------------------------------------------------------------------------------
# 2. history.csv as training goes
# --------------------------------------------------------------------------------------------------------------

def make_corpus(folder: Path, n_train=300, n_valid=20, seed=0) -> Path:
    "Two tiny made-up languages: yy is xx with each word spelled backwards, in reverse order."
    import random
    rng, words = random.Random(seed), "ka lu mi so te ra no vi pe zu ba do fi go hu je".split()
    folder.mkdir(parents=True, exist_ok=True)
    for name, n in (("train", n_train), ("valid", n_valid)):
        xx = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 6))) for _ in range(n)]
        (folder / f"{name}.xx").write_text("".join(s + "\n" for s in xx), encoding="utf-8")
        (folder / f"{name}.yy").write_text("".join(" ".join(w[::-1] for w in reversed(s.split())) + "\n" for s in xx),
                                           encoding="utf-8")
    return folder


STEPS = 400


def updates_done(err_path: Path) -> int:
    counts = re.findall(rf"(\d+)/{STEPS}\b", err_path.read_text(errors="replace"))
    return int(counts[-1]) if counts else 0


def train_and_stop(argv: list[str], err_path: Path, at_least: int, timeout=240) -> str:
    "Run the console script, SIGINT it once its progress bar shows `at_least` updates; its stderr."
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(err_path, "w"), env=ENV,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + timeout
    while updates_done(err_path) < at_least:
        assert p.poll() is None, f"the run ended before the signal:\n{err_path.read_text()[-2000:]}"
        assert time.monotonic() < deadline, err_path.read_text()[-2000:]
        time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=120) == 130, err_path.read_text()[-2000:]
    return err_path.read_text()


def history(d: Path) -> list[list[str]]:
    rows = (d / "history.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == "step,train_loss,learning_rate,val_loss", rows[:2]
    return [r.split(",") for r in rows[1:]]


def test_history_reaches_the_disk_and_a_resumed_run_appends(tmp_path):
    "Stopped: one row per update its checkpoint holds. Resumed: rows past the checkpoint go first, then it appends."
    c = make_corpus(tmp_path / "toy")
    d = tmp_path / "run"
    argv = [EXE, "train", "--recipe", "tiny", "--train", c / "train", "--valid", c / "valid", "--src", "xx", "--tgt", "yy",
            "--max-steps", STEPS, "--save-every", 1000, "--beam-size", 1, "--checkpoint-dir", d]
    argv = [str(a) for a in argv]
    train_and_stop(argv, tmp_path / "first.err", at_least=8)
    k = int(latest_checkpoint(d).stem[5:])
    first = history(d)
    assert [int(r[0]) for r in first] == list(range(1, k + 1)), (k, first[:3], first[-3:])
    # a run killed after update k (SIGKILL, a power cut) may have written rows its checkpoint does not hold
    with open(d / "history.csv", "a", encoding="utf-8") as f: f.write(f"{k + 1},999,0.001,\n{k + 2},999,0.001,\n")
    train_and_stop([*argv, "--resume"], tmp_path / "second.err", at_least=k + 6)
    k2 = int(latest_checkpoint(d).stem[5:])
    second = history(d)
    assert [int(r[0]) for r in second] == list(range(1, k2 + 1)), (k, k2, second[k - 2:k + 3])
    assert [r[:3] for r in second[:k]] == [r[:3] for r in first]            # the rows before the stop, kept as they were
    # (a stop at an epoch's last update comes before that epoch's validation: the resumed run adds its loss to row k)
    assert all(b[3] == a[3] for a, b in zip(first, second) if a[3])
    assert all(r[1] != "999" for r in second)                                # the killed run's rows are gone


# --------------------------------------------------------------------------------------------------------------
# Smaller: errors worded in flags; one numbering of layers and heads
# --------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("flags, want", [(["--src", "en"], "en→de: use --model en-de, or a model trained by "
                                                          "`annotated-transformer train --src en --tgt de`"),
                                         (["--src", "en", "--tgt", "fr"], "en→fr: use a model trained by "
                                                                          "`annotated-transformer train --src en --tgt fr`")])
def test_a_direction_mismatch_names_flags_not_keywords(capsys, flags, want):
    rc, out, err = run_main(capsys, "translate", "--model", "de-en", *flags, "Hallo")
    assert (rc, out) == (1, ""), err
    assert messages(err) == [f"annotated-transformer translate: error: --model de-en translates de→en, not {want}"], err
    assert "src=" not in err and "tgt=" not in err


def test_layers_and_heads_are_numbered_from_0_everywhere():
    "The figures of chapter 37 and the `attention` command count from 0; the browser page's menus and labels too."
    help_text = " ".join(build_parser().commands["attention"].format_help().split())
    assert "--layer LAYER layer, from 0" in help_text and "--head HEAD one head, from 0" in help_text
    js = (ROOT / "web/src/translate.js").read_text(encoding="utf-8")
    assert "i + 1" not in js and "l + 1" not in js and "Number(hv) + 1" not in js    # no 1-based labels
    assert js.count("value: String(i), text: String(i)") == 2                        # layer and head menus


# --------------------------------------------------------------------------------------------------------------
# 4. a run on your files plans enough updates to learn
# --------------------------------------------------------------------------------------------------------------

def test_a_run_on_your_files_plans_enough_updates(tmp_path):
    "300 pairs with the small recipe: not 24 updates (2 an epoch, 12 epochs), which learn nothing; the note names the"
    " flags that set a run's length, not --warmup-steps (which would not help)."
    from types import SimpleNamespace
    from annotated_transformer.data import Corpus
    from annotated_transformer.multi30k import RunOptions, prepare_run, training_parts, run_length
    c = make_corpus(tmp_path / "toy", n_train=300)
    logs = []
    options = RunOptions("small", checkpoint_dir=tmp_path / "run", src="xx", tgt="yy", evaluate_splits=("val",),
                         corpus=Corpus.files(c / "train", c / "valid"))
    run = prepare_run(SimpleNamespace(device=torch.device("cpu"), is_main=True), options, {}, logs.append)
    loader = training_parts(run, torch.device("cpu"), log=logs.append)[1]
    planned = run_length(len(loader), run.recipe, None, None)[2]
    assert len(loader) <= 3 and planned >= 300, (len(loader), planned, logs)    # 300 updates reach ~58 BLEU here
    assert not any("--warmup-steps" in m for m in logs), logs
    assert any("--epochs or --max-steps" in m and str(planned) in m for m in logs), logs
    run = prepare_run(SimpleNamespace(device=torch.device("cpu"), is_main=True), options, {}, logs.append)
    loader = training_parts(run, torch.device("cpu"), max_steps=40)[1]          # a length asked for: exactly that
    assert run_length(len(loader), run.recipe, 40, None)[2] == 40


# --------------------------------------------------------------------------------------------------------------
# 9. one recipe for the browser page
# --------------------------------------------------------------------------------------------------------------

def _recipe_commands() -> list[str]:
    "The shell lines of chapter 35's 'Running the page locally'."
    cells = json.loads((ROOT / "nbs/35_onnx_export.ipynb").read_text(encoding="utf-8"))["cells"]
    text = next("".join(c["source"]) for c in cells if "## Running the page locally" in "".join(c["source"]))
    block = text.split("## Running the page locally", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [l.split("#")[0].strip() for l in block.strip().splitlines() if l.split("#")[0].strip()]


def test_one_recipe_builds_the_browser_page(tmp_path):
    "Chapter 35, the deploy workflow and tools/render_docs.py build and take the page's files from one folder, web/dist."
    import importlib.util
    recipe = _recipe_commands()
    assert not any("site/" in l for l in recipe), recipe
    assert "(cd web && npm ci && npm run build)" in recipe, recipe                      # the bundle: into web/dist
    for d in ("de-en", "en-de"):
        assert f"annotated-transformer export --format onnx --model {d} --output web/dist/models/{d}" in recipe, recipe
    deploy = (ROOT / ".github/workflows/deploy.yaml").read_text(encoding="utf-8")
    assert "(cd web && npm ci && npm run build)" in deploy and "--output web/dist/models/$d" in deploy
    assert "cp -r web/dist _docs/browser" in deploy and any("cp -r web/dist _docs/browser" in l for l in recipe)
    # render_docs takes all of web/dist: the bundle's chunks and the models, not only its top-level files
    spec = importlib.util.spec_from_file_location("render_docs", ROOT / "tools/render_docs.py")
    render_docs = sys.modules.setdefault("render_docs", importlib.util.module_from_spec(spec))
    if not hasattr(render_docs, "browser_assets"): spec.loader.exec_module(render_docs)
    dist = tmp_path / "dist"
    for f in ("translate.js", "chunks/a.js", "models/de-en/model.json"):
        (dist / f).parent.mkdir(parents=True, exist_ok=True); (dist / f).write_text(f)
    render_docs.browser_assets(tmp_path / "out", dist)
    assert sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*") if p.is_file()) == \
        ["browser/chunks/a.js", "browser/models/de-en/model.json", "browser/translate.js"]
    # following it leaves `git status` clean
    r = subprocess.run(["git", "check-ignore", "web/dist/translate.js", "web/dist/models/de-en/model.json",
                        "_docs/browser/translate.js", "site/browser/translate.js"], cwd=ROOT, capture_output=True, text=True)
    assert len(r.stdout.split()) == 4, r.stdout


# --------------------------------------------------------------------------------------------------------------
# 5. the browser page treats empty and over-long input as the package does
# --------------------------------------------------------------------------------------------------------------

def node_eval(expr: str):
    "The value of a JavaScript expression over web/src/input.js (the page's input rules), computed by node."
    import shutil
    if not shutil.which("node"): pytest.skip("node is not installed (the page's build needs it too)")
    script = f"import * as m from {json.dumps((ROOT / 'web/src/input.js').as_uri())};\nconsole.log(JSON.stringify({expr}));"
    r = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_the_page_cuts_and_skips_input_as_the_package_does():
    from annotated_transformer.evaluation import encode_sources
    from annotated_transformer.embeddings import BOS_IDX, EOS_IDX
    class Ids:                                                       # a codec whose tokens are given
        def __init__(self, ids): self.ids = ids
        def encode_src(self, texts): return [self.ids for _ in texts]
    for n in (3, 1022, 1023, 2000):
        tokens = list(range(10, 10 + n))
        want, cut = encode_sources(Ids(tokens), ["x"], max_len=1024)
        got = node_eval(f"m.sourceIds({json.dumps(tokens)}, {{bos: {BOS_IDX}, eos: {EOS_IDX}, maxLen: 1024}})")
        assert got == {"ids": want[0], "cut": bool(cut)}, n
    assert node_eval("['', '  ', '\\n\\t', ' a '].map(m.isBlank)") == [True, True, True, False]   # as str.strip()
    assert node_eval("m.cutMessage(1024)") == ("the sentence is longer than the model's maximum of 1024 tokens; "
                                               "translating its first 1022")


@pytest.mark.parametrize("n, dpr", [(5, 1), (100, 2), (684, 1), (684, 2), (1024, 1), (1024, 3)])
def test_a_heatmap_stays_within_what_a_browser_draws(n, dpr):
    layout = node_eval(f"[m.heatmapLayout({n}, {n}, {dpr}), m.MAX_CANVAS_PX, m.LABEL_PX]")
    (cell, labels), limit, label_px = layout[0].values(), layout[1], layout[2]
    side = (label_px + n * cell + 4) * dpr                            # the widest canvas the page draws
    assert 1 <= cell <= 18 and side <= limit <= 16384, layout
    assert labels == (cell >= 8) and (n > 100 or cell == 18)          # a short sentence keeps full-size, labelled cells


def test_ctrl_c_through_the_console_script_keeps_the_partial(tiny_ckpt, tmp_path, capsys):
    "The real thing: SIGINT to `annotated-transformer translate --input F --output O` once a few batches are done."
    ckpt, _ = tiny_ckpt
    src, out_path, err_path = tmp_path / "in.de", tmp_path / "out.en", tmp_path / "err"
    lines = input_lines() * 25                                                        # 1,000 lines, 125 batches
    src.write_text("".join(l + "\n" for l in lines), encoding="utf-8")
    argv = [EXE, "translate", "--checkpoint", ckpt, "--input", src, "--beam-size", 4, "--batch-size", 8, "--device", "cpu"]
    p = subprocess.Popen([str(a) for a in [*argv, "--output", out_path]], stdout=subprocess.DEVNULL,
                         stderr=open(err_path, "w"), env=ENV, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 240
    while not re.search(r"\b([4-9]\d|\d{3,})/1000\b", err_path.read_text(errors="replace")):   # 40 sentences done
        assert p.poll() is None and time.monotonic() < deadline, err_path.read_text()[-2000:]
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=120) == 130, err_path.read_text()[-2000:]
    partial = Path(f"{out_path}.partial")
    assert not out_path.exists() and partial.is_file()
    kept = partial.read_text(encoding="utf-8").splitlines()
    msg = messages(err_path.read_text())
    assert msg == [f"annotated-transformer translate: stopped by SIGINT; the first {len(kept):,} of 1,000 lines are "
                   f"translated in {partial}; {out_path} was not written"], msg
    rc, out, err = run_main(capsys, *argv[1:], "--output", tmp_path / "whole.en")          # uninterrupted, same batches
    assert rc == 0, err
    assert kept == (tmp_path / "whole.en").read_text(encoding="utf-8").splitlines()[:len(kept)]
