"""tools/time_to_quality.py reads a run typed as the README has it from what `train` prints: its parser against the
printer itself, so a change to one shows here."""
import contextlib, io, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from time_to_quality import printed_result                          # noqa: E402
from annotated_transformer.cli_train import _print_multi30k         # the lines a run without --json prints


def test_the_printed_scores_are_read_back():
    rows = [{"set": s, "sentences": n, "bleu": b, "chrf": 60.0, "bleu_signature": "b", "chrf_signature": "c"}
            for s, n, b in (("val", 1014, 41.58), ("test_2016_flickr", 1000, 41.07), ("tatoeba", 2196, 4.15))]
    res = {"epochs": 9, "src": "de", "tgt": "en", "updates": 2214, "recipe_name": "small", "train_time_s": 1326,
           "hardware": "cpu", "resumed_at": 0, "updates_this_part": 2214, "train_loss_start": 7.7,
           "train_loss_end": 1.0, "checkpoint": "c/step_00002214.pt", "history": ["c/history.csv"],
           "averaged": ["a", "b"], "val_bleu_averaged": 41.46, "val_bleu_last": 41.58, "selected": "last",
           "recipe": {"beam_size": 4, "length_penalty": 0.6}, "scores": rows}
    out = io.StringIO()
    with contextlib.redirect_stdout(out): _print_multi30k(res)
    got = printed_result(out.getvalue())
    assert got == {"updates": 2214, "epochs": 9, "recipe_name": "small", "train_time_s": 1326.0, "selected": "last",
                   "val_bleu_averaged": 41.46, "val_bleu_last": 41.58, "val_bleu": 41.58,
                   "test_2016_flickr_bleu": 41.07, "tatoeba_bleu": 4.15}, got


def test_a_stopped_run_has_no_result():
    assert printed_result("annotated-transformer train: stopped by SIGTERM after update 375; saved ...") is None


def test_the_recorded_commands_carry_the_pin_and_the_caps():
    "`save` writes each command as it ran: its --cpu/--threads and the instruction-set caps it ran under."
    from time_to_quality import pin, caps_prefix
    assert pin({"cpu": 0, "threads": 1}) == " --cpu 0 --threads 1" and pin({"cpu": None, "threads": None}) == ""
    caps = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert caps_prefix({"env": caps}) == "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 "
    assert caps_prefix({"env": {}}) == caps_prefix({}) == ""


def test_sets_scores_the_model_the_run_kept(tmp_path):
    "`sets` scores what a finished run kept: averaged.pt, or its last checkpoint; a run stopped early has no such model."
    import json, pytest
    from time_to_quality import chosen_checkpoint
    (tmp_path / "kept").mkdir()
    for n in ("step_00000900.pt", "step_00001000.pt", "averaged.pt"): (tmp_path / "kept" / n).touch()
    for selected, want in (("last", "step_00001000.pt"), ("averaged", "averaged.pt")):
        (tmp_path / "run.json").write_text(json.dumps({"result": {"selected": selected}}))
        assert chosen_checkpoint(tmp_path) == tmp_path / "kept" / want
    (tmp_path / "run.json").write_text(json.dumps({"result": None}))
    with pytest.raises(SystemExit, match="did not end by itself"): chosen_checkpoint(tmp_path)


def test_sets_takes_a_model_from_a_commit(tmp_path):
    "`sets --at REV` scores the model that shipped at REV: its folder and its record, from git, not from today's tree."
    import subprocess, pytest
    from time_to_quality import model_at, ROOT
    if not (ROOT / ".git").exists(): pytest.skip("not a git checkout")
    rev = "3dc6365^"     # the commit before the en-de model of `small` shipped: `small-long`'s
    if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", rev], capture_output=True).returncode:
        pytest.skip(f"{rev} is not in this clone's history")
    folder, card = model_at("en-de", rev, tmp_path)
    assert {"model.safetensors", "config.json", "vocab.json"} <= {p.name for p in folder.iterdir()}
    assert "--recipe small-long" in card["train_command"] and (card["src"], card["tgt"]) == ("en", "de")
