"Shipped-model folders (appendix: pretrained): export → load round trip, checksums refuse tampering, loading never unpickles."
import json, os, pickle, shutil, subprocess, sys
from pathlib import Path

import pytest
import torch

from annotated_transformer import pretrained
from annotated_transformer.batching import Batch
from annotated_transformer.data import SAMPLE_DIR, BPECodec, load_split
from annotated_transformer.model import count_parameters, create_transformer
from annotated_transformer.pretrained import (CONFIG, DATA_FILES, SHIPPED, SHIPPED_SHA256SUMS, SUMS, VOCAB, WEIGHTS,
                                              export_model, file_sha256, load_model)
from annotated_transformer.training import TrainState
from annotated_transformer.checkpoints import save_checkpoint

ROOT = Path(__file__).resolve().parents[1]
torch.set_num_threads(1)  # tiny models: one thread is fastest on a busy machine
BATCH = Batch(torch.tensor([[1, 7, 8, 9, 2]]), torch.tensor([[1, 10, 11, 2]]))


def logits(m): return m.generator.logits(m(BATCH.src, BATCH.tgt_in, BATCH.src_mask, BATCH.tgt_mask))  # (1, 3, V)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    "A tiny de→en training checkpoint (with Adam state, as `fit` writes) and its model."
    work = tmp_path_factory.mktemp("pretrained")
    codec = BPECodec.build(load_split("train", SAMPLE_DIR, 200), vocab_size=300)
    torch.manual_seed(0)
    model = create_transformer(codec.src_vocab_size, codec.tgt_vocab_size, "tiny", share_embeddings=True)
    opt = torch.optim.Adam(model.parameters())
    logits(model).logsumexp(-1).mean().backward(); opt.step()        # one update: Adam's moments are in the checkpoint
    ckpt = save_checkpoint(work / "step_00000001.pt", model.eval(), opt, train_state=TrainState(step=1),
                           extra={"vocab": codec.to_dict(), "src": "de", "tgt": "en"})
    return work, ckpt, model


@pytest.fixture(scope="module")
def folder(tiny):
    work, ckpt, _ = tiny
    return export_model(ckpt, work / "de-en")


def test_tampered_weights_refused(folder, tmp_path):
    bad = Path(shutil.copytree(folder, tmp_path / "m"))
    data = bytearray((bad / WEIGHTS).read_bytes()); data[len(data) // 2] ^= 0x01; (bad / WEIGHTS).write_bytes(bytes(data))
    with pytest.raises(ValueError) as e: load_model(bad)
    msg = str(e.value)
    assert "\n" not in msg and WEIGHTS in msg and "sha256" in msg and "corrupt or was changed" in msg
    assert file_sha256(folder / WEIGHTS) in msg and file_sha256(bad / WEIGHTS) in msg   # expected and actual


def test_tampered_sums_refused_by_the_pin(folder, tmp_path, monkeypatch):
    "A shipped model pins its SHA256SUMS: a weight changed *and* re-summed is still refused."
    models = tmp_path / "models"; shutil.copytree(folder, models / "de-en")
    monkeypatch.setattr(pretrained, "MODELS_DIR", models)
    monkeypatch.setitem(pretrained.SHIPPED_SHA256SUMS, "de-en", file_sha256(folder / SUMS))
    assert load_model("de-en")[2]["path"] == str(models / "de-en")     # the pinned, untouched folder loads
    d = models / "de-en"
    data = bytearray((d / WEIGHTS).read_bytes()); data[-1] ^= 0x01; (d / WEIGHTS).write_bytes(bytes(data))
    (d / SUMS).write_text("".join(f"{file_sha256(d / n)}  {n}\n" for n in DATA_FILES))
    load_model(d)                                                      # as a plain folder: consistent, so loaded
    with pytest.raises(ValueError, match=r"SHA256SUMS: sha256 mismatch, expected .* \(pinned in the package\)"):
        load_model("de-en")


def test_loading_never_unpickles(folder, monkeypatch):
    def refuse(*a, **k): raise AssertionError("load_model unpickled something")
    for mod, name in ((torch, "load"), (pickle, "load"), (pickle, "loads")): monkeypatch.setattr(mod, name, refuse)
    model, codec, meta = load_model(folder)
    assert meta["format"] == pretrained.MODEL_FORMAT and not model.training


def test_round_trip_logits(tiny, folder, tmp_path):
    _, ckpt, model = tiny
    with torch.no_grad():
        want = logits(model)
        m32 = load_model(export_model(ckpt, tmp_path / "fp32", storage_dtype="float32"))[0]
        assert torch.equal(logits(m32), want)                             # float32 storage: identical
        got = logits(load_model(folder)[0])
    assert got.dtype == torch.float32 and got.shape == want.shape
    assert (got - want).abs().max() < 1e-2                             # float16 storage: close


def test_exported_folder_is_small(tiny, folder):
    "float16: 2 bytes a stored number (tied weights once; the positional tables are buffers) + the vocabulary + a few kB."
    _, ckpt, model = tiny
    params, buffers = count_parameters(model), sum(b.numel() for b in model.buffers())
    weights = (folder / WEIGHTS).stat().st_size
    assert 2 * params < weights <= 2 * (params + buffers) + 16_000
    total = sum(p.stat().st_size for p in folder.iterdir())
    assert total <= 2 * (params + buffers) + (folder / VOCAB).stat().st_size + 32_000
    assert total < ckpt.stat().st_size / 2                            # the checkpoint carries fp32 weights and Adam's moments


def test_export_is_deterministic(tiny, folder, tmp_path):
    "Re-exporting with a new card (e.g. after scoring the exported model) keeps every data file, so the pin holds."
    _, ckpt, _ = tiny
    again = export_model(ckpt, tmp_path / "de-en", card={"Scores": [{"set": "test_2016_flickr", "BLEU": 1.0}]})
    assert (again / SUMS).read_bytes() == (folder / SUMS).read_bytes()
    assert "## Scores" in (again / "MODEL_CARD.md").read_text() and "## Scores" not in (folder / "MODEL_CARD.md").read_text()


def test_missing_file_and_unknown_names(folder, tmp_path, monkeypatch):
    d = Path(shutil.copytree(folder, tmp_path / "m")); (d / CONFIG).unlink()
    with pytest.raises(FileNotFoundError, match="has no config.json"): load_model(d)
    with pytest.raises(FileNotFoundError, match=r"unknown model 'fr-en': not a shipped model \(de-en, en-de\)"):
        load_model("fr-en")
    monkeypatch.setattr(pretrained, "MODELS_DIR", tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="the en-de model is not in this installation"): load_model("en-de")


@pytest.mark.skipif(shutil.which("sha256sum") is None, reason="needs coreutils' sha256sum")
def test_sha256sum_checks_the_folder(folder):
    r = subprocess.run(["sha256sum", "-c", SUMS], cwd=folder, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(l.split(":")[0] for l in r.stdout.splitlines()) == sorted(DATA_FILES)


@pytest.mark.parametrize("name", list(SHIPPED))
def test_shipped_model_is_pinned_and_loads(name):
    "Every shipped folder present has its SHA256SUMS pinned in the package, loads, and translates its own direction."
    if not (pretrained.MODELS_DIR / name).is_dir():
        with pytest.raises(FileNotFoundError, match=f"the {name} model is not in this installation"): load_model(name)
        pytest.skip(f"the {name} model is not shipped yet")
    assert SHIPPED_SHA256SUMS[name] is not None, f"set SHIPPED_SHA256SUMS[{name!r}] in nbs/32_pretrained.ipynb"
    model, codec, meta = load_model(name)
    assert f"{meta['src_lang']}-{meta['tgt_lang']}" == name and not model.training
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert sum(p.stat().st_size for p in (pretrained.MODELS_DIR / name).iterdir()) <= 20 * 2**20   # ≤ 20 MB a model


def test_shipped_models_are_package_data(tmp_path):
    "A non-editable install carries the shipped model folders."
    shipped = [n for n in SHIPPED if (pretrained.MODELS_DIR / n).is_dir()]
    if not shipped: pytest.skip("no model is shipped yet")
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target",
                        str(target), str(ROOT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for n in shipped:
        got = sorted(p.name for p in (target / "annotated_transformer" / "models" / n).iterdir())
        assert got == sorted(p.name for p in (pretrained.MODELS_DIR / n).iterdir()), n
