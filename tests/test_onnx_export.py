"""`annotated-transformer export --format onnx` end to end: the shipped de-en model exported by the command line,
run by ONNX Runtime in Python, against our PyTorch decoder (chapter 35). Two different computations: greedy ids
are compared by the near-tie rule, teacher-forced log-probs within 1e-4. Without the extra, a clear error."""
import json, os, shutil, subprocess, sys
from pathlib import Path
import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="the [onnx] extra is not installed")
CLI = [sys.executable, "-m", "annotated_transformer"]
SENTENCES = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.",
             "Eine Frau in einem roten Kleid singt auf einer Bühne.", "Kinder spielen Fußball."]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx") / "de-en"
    r = subprocess.run(CLI + ["export", "--format", "onnx", "--model", "de-en", "--output", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"wrote {out}" in r.stdout
    return out


def test_files_and_manifest(exported):
    names = sorted(p.name for p in exported.iterdir())
    assert names == ["decoder.onnx", "encoder.onnx", "model.json", "tokenizer.json", "vocab.json", "weights.bin"]
    m = json.loads((exported / "model.json").read_text())
    assert (m["src_lang"], m["tgt_lang"], m["n_layers"], m["vocab_size"]) == ("de", "en", 3, 8000)
    total = sum(m["bytes"].values())
    assert total < 20e6, f"{total} bytes: the page's budget is 25 MB with the runtime"   # fp16 weights, shared


def test_greedy_and_log_probs_match_pytorch(exported):
    import torch
    from annotated_transformer.pretrained import load_model
    from annotated_transformer.evaluation import encode_sources
    from annotated_transformer.decoding import SearchOptions
    from annotated_transformer.evaluation import decode_corpus
    from annotated_transformer.fast_decoding import fast_beam_search
    from annotated_transformer.fast_model import make_fast
    from annotated_transformer.onnx_export import OnnxTranslator, graph_greedy, teacher_forced, parting_gap
    torch.set_num_threads(1)
    model, codec, _ = load_model("de-en")
    model = make_fast(model)                                   # as the command line decodes
    ort_model = OnnxTranslator(exported)
    ids, _ = encode_sources(codec, SENTENCES, model.config.max_len)
    ours = decode_corpus(model, ids, SearchOptions(beam_size=1), fast_beam_search)
    for src, o in zip(ids, ours):
        theirs = graph_greedy(ort_model.encoder, ort_model.step, np.array([src]), len(src) + 50)
        ref = teacher_forced(model, o + [2], src)
        gap = parting_gap(o + [2], theirs, ref)
        assert gap is None or gap < 1e-3, (o, theirs, gap)
        np.testing.assert_allclose(teacher_forced(ort_model, o + [2], src), ref, atol=1e-4)


def test_refuses_quantization_and_a_foreign_folder(tmp_path):
    r = subprocess.run(CLI + ["export", "--format", "onnx", "--model", "de-en", "--quantization", "int8",
                              "--output", str(tmp_path / "x")], capture_output=True, text=True)
    assert r.returncode != 0 and "applies to --format ctranslate2 only" in r.stderr
    (tmp_path / "busy").mkdir(); (tmp_path / "busy" / "notes.txt").write_text("mine")
    r = subprocess.run(CLI + ["export", "--format", "onnx", "--model", "de-en", "--output", str(tmp_path / "busy")],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "not an ONNX export" in r.stderr
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"


def test_without_the_extra_the_error_names_it(tmp_path):
    code = ("import sys; sys.modules['onnxscript'] = None; sys.argv = ['annotated-transformer', 'export', "
            f"'--format', 'onnx', '--model', 'de-en', '--output', {str(tmp_path / 'x')!r}]; "
            "from annotated_transformer.cli import main; sys.exit(main())")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode != 0
    assert "pip install 'annotated-transformer[onnx]'" in r.stderr, r.stderr[-1000:]


@pytest.mark.parametrize("name", ["encoder.onnx", "decoder.onnx", "weights.bin"])
def test_a_truncated_export_is_one_line(exported, tmp_path, name):
    "A copy of an export cut short (a graph or the shared weights): `translate` says so in one line that names the"
    " folder, the file and the fix; nothing from ONNX Runtime's own log, no C++ signature."
    folder = tmp_path / "cut"
    shutil.copytree(exported, folder)
    f = folder / name
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    r = subprocess.run(CLI + ["translate", "--engine", "onnxruntime", "--model", str(folder), SENTENCES[0]],
                       capture_output=True, text=True)
    lines = r.stderr.splitlines()
    assert r.returncode != 0 and len(lines) == 1, r.stderr
    assert str(folder) in lines[0] and name in lines[0], lines[0]
    assert "annotated-transformer export --format onnx" in lines[0], lines[0]          # the fix
    for engine_text in ("onnxruntime::", "std::", "\x1b[", "[ONNXRuntimeError]", ".cc:"):
        assert engine_text not in r.stderr, r.stderr
