"""The deploy engines from the command line (chapter 36): `translate --engine ctranslate2|onnxruntime`.

1. On 20 validation sentences, each engine's greedy output has the ids of `--engine torch` on at least 19, and where
   they part, the torch model's two best next tokens were within LOGP_MARGIN (tests/near_ties.py, the rule of
   tests/test_browser_translate.py). Beam 4 holds ONNX Runtime (our search over its steps) to the same rule; CTranslate2
   searches by its own stopping rule, so its count is printed (and kept well above chance).
2. The export cache: the first run exports and says so, the second does not; a cached folder changed after its export
   is refused, said so, and rebuilt; an exported folder can be given as --model.
3. Large inputs: --input shows a progress bar and ends with sentences/s and the engine; a pipe is answered window by
   window, before its end; Ctrl-C keeps the finished lines in OUTPUT.partial, whichever the engine.
4. Errors: a missing extra names it; a direction mismatch is refused as with torch; a compute type an engine lacks.
The engines are different computations from torch: nothing here compares them bit for bit."""
import gzip, json, os, re, signal, subprocess, sys, threading, time
from pathlib import Path

import pytest
import torch

import annotated_transformer.engines as engines
from annotated_transformer.engines import EngineOptions, open_engine, cache_problem, CACHE_RECORD
from annotated_transformer.evaluation import encode_sources
from annotated_transformer.decoding import SearchOptions
from annotated_transformer.pretrained import load_model
from annotated_transformer.fast_model import make_fast
from near_ties import near_tie
from cli_run import run_main, messages, stop_at_batch, val_lines

pytest.importorskip("ctranslate2", reason="the [ctranslate2] extra is not installed")
pytest.importorskip("onnxruntime", reason="the [onnx] extra is not installed")

N = 20               # validation sentences per engine
MIN_SAME = 19        # identical ids at least this often (greedy; beam 4 for ONNX Runtime)
EXE = str(Path(sys.executable).parent / "annotated-transformer")


def _val(n: int) -> list[str]: return val_lines(n)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    "A cache folder of this module's own (XDG_CACHE_HOME), never the user's."
    root = tmp_path_factory.mktemp("xdg")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(root))
        torch.set_num_threads(1)
        yield root


@pytest.fixture(scope="module")
def val_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("val") / "val20.de"
    p.write_text("".join(s + "\n" for s in _val(N)), encoding="utf-8")
    return p


# ---------------------------------------------------------------------------------------------- 1. the same outputs
def _ids(engine, sentences, beam):
    ids, _ = encode_sources(engine.codec, sentences, engine.config.max_len)
    out = [None] * len(ids)
    for idx, hyps in engine.decode_batches(ids, SearchOptions(beam_size=beam), 64):
        for i, h in zip(idx, hyps): out[i] = h
    return ids, out


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("name", ["ctranslate2", "onnxruntime"])
def test_engine_outputs_match_torch(cache, val_file, capsys, name, beam):
    sentences = val_file.read_text(encoding="utf-8").splitlines()
    texts = {}
    for e in ("torch", name):                                          # the command line, text out
        rc, out, err = run_main(capsys, "translate", "--model", "de-en", "--engine", e, "--beam-size", beam,
                                "--device", "cpu", "--input", val_file)
        assert rc == 0, err
        texts[e] = out.splitlines()
        assert len(texts[e]) == N
    torch_engine = open_engine(name_or_dir="de-en", options=EngineOptions("torch", device="cpu"))
    other = open_engine(name_or_dir="de-en", options=EngineOptions(name))
    src, ours = _ids(torch_engine, sentences, beam)
    _, theirs = _ids(other, sentences, beam)
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    # the command line printed what the engines decode
    assert all(texts["torch"][i] == texts[name][i] for i in range(N) if i not in differ)
    model = make_fast(load_model("de-en")[0])                   # the fast model, unpacked: the reference
    far = [i for i in differ if not near_tie(model, src[i], ours[i], theirs[i], beam)]
    print(f"[engines] {name} beam {beam}: {N - len(differ)}/{N} identical ids to torch, "
          f"{len(differ) - len(far)} near-ties, {len(far)} other differences")
    if name == "ctranslate2" and beam > 1:        # its own stopping rule: counted, and far above chance
        assert N - len(differ) >= 16, differ
    else:
        assert N - len(differ) >= MIN_SAME and not far, (differ, far)


def test_evaluate_takes_the_engine(cache, capsys):
    rc, out, err = run_main(capsys, "evaluate", "--model", "de-en", "--engine", "ctranslate2", "--compute-type",
                            "int8", "--split", "val", "--max-sentences", 40, "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert (res["engine"], res["compute_type"], res["sentences"]) == ("ctranslate2", "int8", 40)
    assert 20 < res["bleu"] < 80


# ---------------------------------------------------------------------------------------------- 2. the export cache
def test_the_cache_exports_once_and_refuses_a_changed_export(cache, val_file, capsys):
    args = ("translate", "--model", "de-en", "--engine", "ctranslate2", "--compute-type", "int8_float32",
            "--input", val_file)
    rc, first, err = run_main(capsys, *args)
    assert rc == 0, err
    said = [m for m in messages(err) if "export" in m]
    assert len(said) == 1 and "exporting the model for ctranslate2 (int8_float32)" in said[0], said
    folder = Path(re.search(r"into (\S+),", said[0])[1])
    rc, second, err = run_main(capsys, *args)
    assert rc == 0 and second == first, err
    assert not [m for m in messages(err) if "export" in m], err                 # reused, not exported again
    record = json.loads((folder / CACHE_RECORD).read_text())
    assert record["key"]["engine"] == "ctranslate2" and len(record["key"]["weights_sha256"]) == 64

    (folder / "model.bin").write_bytes((folder / "model.bin").read_bytes()[:-4] + b"\0\0\0\0")   # tampered
    rc, third, err = run_main(capsys, *args)
    assert rc == 0 and third == first, err
    said = [m for m in messages(err) if "export" in m]
    assert "is not trusted (model.bin changed since the export): exporting it again" in said[0], said
    assert cache_problem(folder, record["key"]) is None                         # rebuilt whole

    (folder / "extra.txt").write_text("x")                                      # a file that was not exported
    rc, _, err = run_main(capsys, *args)
    assert rc == 0 and "its files differ from the recorded ones (extra.txt)" in err, err
    assert not (folder / "extra.txt").exists()


def test_an_exported_folder_is_used_as_it_is(cache, tmp_path, capsys):
    rc, out, err = run_main(capsys, "export", "--model", "de-en", "--format", "ctranslate2", "--output", tmp_path / "ct2")
    assert rc == 0, err
    rc, out, err = run_main(capsys, "translate", "--model", tmp_path / "ct2", "--engine", "ctranslate2", "Ein Hund läuft.")
    assert rc == 0 and out.strip(), err
    assert "export" not in err
    rc, out, err = run_main(capsys, "translate", "--model", tmp_path / "ct2", "Ein Hund läuft.")
    assert rc == 1 and "is an export for ctranslate2: use --engine ctranslate2" in err, err
    rc, out, err = run_main(capsys, "translate", "--model", tmp_path / "ct2", "--engine", "ctranslate2",
                            "--src", "en", "--tgt", "de", "Ein Hund.")
    assert rc == 1 and "translates de→en, not en→de" in err, err


# ---------------------------------------------------------------------------------------------- 3. large inputs
def test_input_file_shows_progress_then_speed_and_engine(cache, val_file, capsys):
    rc, out, err = run_main(capsys, "translate", "--model", "de-en", "--engine", "onnxruntime", "--input", val_file)
    assert rc == 0, err
    assert re.search(r"decoding: 100%.*20/20", err), err
    last = messages(err)[-1]
    assert re.fullmatch(r"annotated-transformer translate: 20 sentences in [\d.]+ s \([\d,.]+ sentences/s\), "
                        r"engine onnxruntime float32, \d+ threads?, windows of 512 lines", last), last


def test_a_pipe_is_answered_window_by_window(cache, tmp_path):
    "Two lines into a pipe (--window 2) come back translated while the pipe is still open."
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "XDG_CACHE_HOME": str(cache)}
    p = subprocess.Popen([EXE, "translate", "--model", "de-en", "--engine", "ctranslate2", "--window", "2"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        p.stdin.write("Ein Hund läuft.\nEine Frau singt.\n".encode()); p.stdin.flush()
        got = []
        reader = threading.Thread(target=lambda: got.extend([p.stdout.readline(), p.stdout.readline()]), daemon=True)
        reader.start(); reader.join(timeout=120)
        assert len(got) == 2 and all(got), (got, p.stderr.read1(10000) if p.poll() is not None else "")
        assert p.poll() is None                                   # still running: the pipe is open
        p.stdin.write("Zwei Männer spielen Fußball.\n".encode()); p.stdin.close()
        rest = p.stdout.read().decode().splitlines()
        assert p.wait(timeout=60) == 0 and len(rest) == 1, p.stderr.read().decode()[-2000:]
    finally:
        if p.poll() is None: p.kill()


def _stop_ct2_at(monkeypatch, n):
    "Ctrl-C while CTranslate2 decodes the n-th batch."
    real = engines.ctranslate2_batches
    def batches(*a, **k):
        for i, b in enumerate(real(*a, **k), 1):
            if i == n: raise KeyboardInterrupt
            yield b
    monkeypatch.setattr(engines, "ctranslate2_batches", batches)


@pytest.mark.parametrize("name", ["ctranslate2", "onnxruntime"])
def test_ctrl_c_keeps_the_finished_lines_whatever_the_engine(cache, tmp_path, monkeypatch, capsys, name):
    lines = _val(40)
    src = tmp_path / "in.de"
    src.write_text("".join(l + "\n" for l in lines), encoding="utf-8")
    args = ["translate", "--model", "de-en", "--engine", name, "--input", src, "--batch-size", 4]
    rc, _, err = run_main(capsys, *args, "--output", tmp_path / "whole.en")
    assert rc == 0, err
    whole = (tmp_path / "whole.en").read_text(encoding="utf-8").splitlines()
    (_stop_ct2_at if name == "ctranslate2" else stop_at_batch)(monkeypatch, 4)   # ONNX: our search
    out = tmp_path / "out.en"
    rc, _, err = run_main(capsys, *args, "--output", out)
    monkeypatch.undo()
    assert rc == 130, err
    partial = Path(f"{out}.partial")
    kept = partial.read_text(encoding="utf-8").splitlines()
    assert not out.exists() and kept == whole[:len(kept)] and len(kept) < 40
    assert messages(err)[-1] == (f"annotated-transformer translate: stopped by SIGINT; the first {len(kept)} of 40 "
                                 f"lines are translated in {partial}; {out} was not written"), err


def test_a_real_sigint_stops_ctranslate2_and_keeps_the_partial(cache, tmp_path):
    "SIGINT to the console script while CTranslate2 decodes a long file, past its first window: that window is kept."
    # 5,000 lines, the first six one word long: batches go shortest first, so those finish first
    lines = ["Hund", "Mann", "Frau", "Kind", "Park", "Buch"] + _val(50)[:49] * 100 + ["Schnee"] * 94
    src, out, err_path = tmp_path / "in.de", tmp_path / "out.en", tmp_path / "err"
    src.write_text("".join(l + "\n" for l in lines), encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "XDG_CACHE_HOME": str(cache)}
    p = subprocess.Popen([EXE, "translate", "--model", "de-en", "--engine", "ctranslate2", "--batch-size", "8",
                          "--input", str(src), "--output", str(out)], stdout=subprocess.DEVNULL,
                         stderr=open(err_path, "w"), env=env,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 240
    while not re.search(r"\b(1[1-9]\d\d|[2-9]\d{3})/5000\b", err_path.read_text(errors="replace")):  # a window
        assert p.poll() is None and time.monotonic() < deadline, err_path.read_text()[-2000:]
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=120) == 130, err_path.read_text()[-2000:]
    kept = Path(f"{out}.partial").read_text(encoding="utf-8").splitlines()
    assert not out.exists() and 1024 <= len(kept) < 5000        # at least the first window (one worker: 1,024)
    assert f"the first {len(kept):,} of 5,000 lines are translated" in err_path.read_text()


# ---------------------------------------------------------------------------------------------- 4. errors
def test_a_missing_extra_names_it(cache, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)          # as if the extra were not installed
    rc, _, err = run_main(capsys, "translate", "--engine", "ctranslate2", "Ein Hund.")
    assert rc == 1 and "pip install 'annotated-transformer[ctranslate2]'" in err, err
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    rc, _, err = run_main(capsys, "evaluate", "--engine", "onnxruntime", "--split", "val")
    assert rc == 1 and "pip install 'annotated-transformer[onnx]'" in err, err


@pytest.mark.parametrize("name", ["ctranslate2", "onnxruntime"])
def test_a_direction_mismatch_is_refused_on_every_engine(cache, capsys, name):
    rc, _, err = run_main(capsys, "translate", "--engine", name, "--model", "en-de", "--src", "de", "Ein Hund.")
    assert rc == 1, err
    assert "--model en-de translates en→de, not de→en: use --model de-en" in err, err


def test_nbest_rows_from_ctranslate2(cache, capsys):
    rc, out, err = run_main(capsys, "translate", "--engine", "ctranslate2", "--n-best", 3, "Ein Hund läuft.", "",
                            "Eine Frau singt.")
    assert rc == 0, err
    rows = [r.split("\t") for r in out.splitlines()]
    assert [(r[0], r[1]) for r in rows] == [("1", "1"), ("1", "2"), ("1", "3"), ("3", "1"), ("3", "2"), ("3", "3")]
    scores = [float(r[2]) for r in rows[:3]]
    assert scores == sorted(scores, reverse=True)


def test_compute_types_an_engine_lacks_are_refused(cache, capsys):
    rc, _, err = run_main(capsys, "translate", "--engine", "onnxruntime", "--compute-type", "int8", "x")
    assert rc == 1 and "the onnxruntime engine has float32" in err, err
    rc, _, err = run_main(capsys, "translate", "--compute-type", "float16", "x")
    assert rc == 1 and "the torch engine has float32, int8, bfloat16" in err, err
    rc, out, _ = run_main(capsys, "translate", "--help")
    assert rc == 0 and "--engine {torch,ctranslate2,onnxruntime}" in out and "--compute-type TYPE" in out
    assert "own rule" in " ".join(out.split())


def test_a_broken_exported_folder_is_one_line_naming_it(cache, tmp_path, capsys):
    rc, _, err = run_main(capsys, "export", "--model", "de-en", "--format", "onnx", "--no-attention", "--output",
                          tmp_path / "onnx")
    assert rc == 0, err
    (tmp_path / "onnx" / "decoder.onnx").unlink()
    rc, _, err = run_main(capsys, "translate", "--engine", "onnxruntime", "--model", tmp_path / "onnx", "Ein Hund.")
    assert rc == 1 and "Traceback" not in err, err
    assert f"{tmp_path / 'onnx'} is not a usable onnxruntime export" in err and "decoder.onnx" in err, err


def test_flags_that_cannot_apply_are_refused_before_loading(cache, capsys):
    rc, _, err = run_main(capsys, "translate", "--engine", "ctranslate2", "--early-stop", "Ein Hund.")
    assert rc == 1 and "CTranslate2's beam search stops by its own rule" in err, err
    rc, _, err = run_main(capsys, "translate", "--engine", "onnxruntime", "--input", "/no/such/file.de")
    assert rc == 1 and messages(err) == ["annotated-transformer translate: error: --input /no/such/file.de: no such file"], err


def test_a_closed_pipe_stops_quietly(cache, val_file):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "XDG_CACHE_HOME": str(cache)}
    r = subprocess.run(f"{EXE} translate --engine ctranslate2 --beam-size 1 --batch-size 2 --input {val_file} | head -1",
                       shell=True, capture_output=True, text=True, env=env, executable="/bin/bash")
    assert len(r.stdout.splitlines()) == 1 and "error" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
