"""Big files, nothing lost: `translate` reads its input a window at a time and writes each window as it is done.

1. a stop keeps every finished window in OUTPUT.partial (the same lines as an uninterrupted run), whatever the engine,
   n-best included; OUTPUT itself appears only complete;
2. a pipe gets each window's lines before its input has ended;
3. the model's target language as input gets one warning naming the model that goes the other way; the matched
   language gets none (50 validation sentences of each language, both shipped models).

The speed, memory and 45-second targets are measured by tools/stream_translate.py (nbs/results/stream_translate.json),
not here: timings do not belong in tests on a shared machine.
"""
import os, select, subprocess, sys, time
from pathlib import Path

import pytest

import annotated_transformer.engines as engines
from annotated_transformer.engines import reads_as_target
from cli_run import run_main, messages, val_lines

EXE = str(Path(sys.executable).parent / "annotated-transformer")


def _val(lang: str, n: int = 50) -> list[str]: return val_lines(n, lang)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    "An export cache of this module's own (CTranslate2 exports the shipped model once)."
    d = tmp_path_factory.mktemp("cache")
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(d)
    yield d
    if old is None: os.environ.pop("XDG_CACHE_HOME")
    else: os.environ["XDG_CACHE_HOME"] = old


def _stop_after_batches(monkeypatch, engine: str, n: int):
    "Ctrl-C when the engine is about to hand over its n-th batch, counted across windows."
    count = [0]
    name = "ctranslate2_batches" if engine == "ctranslate2" else "decode_batches"
    real = getattr(engines, name)
    def batches(*a, **k):
        for b in real(*a, **k):
            count[0] += 1
            if count[0] == n: raise KeyboardInterrupt
            yield b
    monkeypatch.setattr(engines, name, batches)


@pytest.mark.parametrize("engine, nbest", [("torch", False), ("torch", True), ("ctranslate2", False)])
def test_a_stop_keeps_every_finished_window(cache, tmp_path, monkeypatch, capsys, engine, nbest):
    if engine == "ctranslate2": pytest.importorskip("ctranslate2")
    lines = _val("de", 40)
    src = tmp_path / "in.de"
    src.write_text("".join(l + "\n" for l in lines), encoding="utf-8")
    args = ["translate", "--model", "de-en", "--engine", engine, "--input", src, "--batch-size", 4, "--window", 8,
            "--beam-size", 2, *(["--n-best", 2] if nbest else [])]
    rc, _, err = run_main(capsys, *args, "--output", tmp_path / "whole.en")
    assert rc == 0, err
    whole = (tmp_path / "whole.en").read_text(encoding="utf-8").splitlines()
    assert not (tmp_path / "whole.en.partial").exists()
    _stop_after_batches(monkeypatch, engine, 7)        # windows of 8 lines = 2 batches of 4: 3 windows done
    out = tmp_path / "out.en"
    rc, _, err = run_main(capsys, *args, "--output", out)
    monkeypatch.undo()
    assert rc == 130, err
    kept = Path(f"{out}.partial").read_text(encoding="utf-8").splitlines()
    rows = 2 if nbest else 1
    assert not out.exists() and len(kept) == 24 * rows and kept == whole[:len(kept)], (len(kept), err)
    assert messages(err)[-1] == (f"annotated-transformer translate: stopped by SIGINT; the first 24 of 40 lines are "
                                 f"translated in {out}.partial; {out} was not written"), err


def test_a_pipe_gets_each_window_before_its_input_ends(tmp_path):
    "Two lines into a pipe that stays open: with --window 2 their translations come out at once."
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen([EXE, "translate", "--model", "de-en", "--window", "2", "--beam-size", "1"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        p.stdin.write("Ein Hund läuft.\nEine Frau singt.\nEin Kind".encode()); p.stdin.flush()   # a 3rd line, unended
        got, deadline = b"", time.monotonic() + 120
        while got.count(b"\n") < 2:
            assert p.poll() is None and time.monotonic() < deadline, (got, p.stderr.read() if p.poll() else "")
            if select.select([p.stdout], [], [], 0.5)[0]: got += os.read(p.stdout.fileno(), 4096)
        first = got.decode().splitlines()
        assert len(first) == 2 and "dog" in first[0].lower() and "woman" in first[1].lower(), first
        p.stdin.write(" lacht.\n".encode()); p.stdin.close()
        rest = p.stdout.read().decode().splitlines()
        assert p.wait(timeout=60) == 0 and len(rest) == 1 and "child" in rest[0].lower(), rest
    finally:
        if p.poll() is None: p.kill()


@pytest.mark.parametrize("lang", ["de", "en"])
@pytest.mark.parametrize("model", ["de-en", "en-de"])
def test_the_wrong_language_is_said_once_and_the_right_one_never(tmp_path, capsys, model, lang):
    "50 validation sentences of each language through each shipped model: a warning exactly where they mismatch."
    src, tgt = model.split("-")
    sentences = _val(lang)
    f = tmp_path / f"in.{lang}"
    f.write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
    rc, out, err = run_main(capsys, "translate", "--model", model, "--input", f, "--beam-size", 1)
    assert rc == 0 and len(out.splitlines()) == 50, err
    warnings = [m for m in messages(err) if "warning: the input reads as" in m]
    if lang == src: assert warnings == [], warnings
    else:
        name = {"de": "German", "en": "English"}
        assert warnings == [f"annotated-transformer translate: warning: the input reads as {name[lang]}, but --model "
                            f"{model} translates {name[src]}→{name[tgt]}: for {name[lang]} input, use --model "
                            f"{tgt}-{src}"], err
    # sentence by sentence too: never a false alarm; most single sentences carry enough stop words to tell
    verdicts = [reads_as_target([s], src, tgt) for s in sentences]
    if lang == src: assert not any(verdicts)
    else: assert sum(verdicts) >= 35, sum(verdicts)      # 37 and 50 of 50 when written


def test_a_sentence_in_the_wrong_language_on_the_command_line(capsys):
    "The issue's own example: German given to the English→German model."
    rc, out, err = run_main(capsys, "translate", "--model", "en-de", "--beam-size", 1, "Ein Hund läuft über die Wiese.")
    assert rc == 0 and out.strip(), err
    assert messages(err) == ["annotated-transformer translate: warning: the input reads as German, but --model en-de "
                             "translates English→German: for German input, use --model de-en"], err
