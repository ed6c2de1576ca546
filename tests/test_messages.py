"""What `train` says about a run's length: a resumed run gives the run's updates in all and this part's (its time is
this part's), and a count of one takes the singular ("1 update per epoch", never "1 updates").

A tiny run on the shipped sample (20 training pairs: one update an epoch), 2 updates, then resumed to 4: seconds,
no data root, no network."""
import dataclasses, shutil
import pytest, torch
from annotated_transformer.data import SAMPLE_DIR
from annotated_transformer.multi30k import RECIPES, RunOptions, fit_length, fit_schedule, train_multi30k
from cli_run import run_main

torch.set_num_threads(1)                                    # tiny models in process: one thread is fastest


def options(run_dir, max_steps: int, resume: bool=False) -> RunOptions:
    return RunOptions("tiny" if not resume else None, run_dir, SAMPLE_DIR, resume=resume, max_steps=max_steps,
                      max_train_pairs=None if resume else 20, device="cpu", evaluate_splits=("val",),
                      max_eval_sentences=5, progress=False)


@pytest.fixture(scope="module")
def first_part(tmp_path_factory):
    "2 updates of the tiny recipe on 20 pairs (one update an epoch): the run's directory and what it logged."
    run_dir, notes = tmp_path_factory.mktemp("run") / "tiny", []
    res = train_multi30k(options(run_dir, 2), log=notes.append, beam_size=1)
    return run_dir, res, notes


def test_a_count_of_one_takes_the_singular(first_part):
    _, res, notes = first_part
    plan = next(m for m in notes if m.startswith("training tiny"))
    assert "on 20 pairs, 1 update per epoch, up to 2 updates, on " in plan, plan
    assert res["updates"] == 2 and res["epochs"] == 2                              # one update an epoch, indeed
    said = []
    fit_schedule(RECIPES["small"], 4, said.append)                                  # a quarter of 4: 1 update
    assert said and said[0].startswith(f"warmup shortened from {RECIPES['small'].warmup_steps} to 1 update ("), said
    fit_length(dataclasses.replace(RECIPES["small"], epochs=1), 1, said.append)   # 1 batch, 1 epoch
    assert "your files make 1 update an epoch: the recipe's 1 epoch would be 1 update, too few" in said[-1], said


def test_a_resumed_run_counts_its_updates_in_all_and_this_parts(first_part, tmp_path):
    run_dir, res, _ = first_part
    assert (res["updates"], res["resumed_at"], res["updates_this_part"]) == (2, 0, 2)   # a new run: all of it
    resumed = tmp_path / "tiny"
    shutil.copytree(run_dir, resumed)
    res2 = train_multi30k(options(resumed, 4, resume=True), log=lambda m: None)
    assert (res2["updates"], res2["resumed_at"], res2["updates_this_part"]) == (4, 2, 2)


def test_train_after_a_resume_says_the_runs_updates_and_this_parts(first_part, tmp_path, capsys):
    "The summary line: '4 updates in all (4 epochs) of the tiny recipe, 2 of them in this part (0.0 min) on …'."
    run_dir, _, _ = first_part
    resumed = tmp_path / "tiny"
    shutil.copytree(run_dir, resumed)
    rc, out, err = run_main(capsys, "train", "--resume", "--checkpoint-dir", resumed, "--data-dir", SAMPLE_DIR,
                            "--max-steps", 4, "--beam-size", 1)
    assert rc == 0, err[-3000:]
    line = next(l for l in out.splitlines() if l.startswith("trained "))
    assert "4 updates in all (4 epochs)" in line and "2 of them in this part (" in line, line
    rc, out, err = run_main(capsys, "train", "--recipe", "tiny", "--data-dir", SAMPLE_DIR, "--max-train-pairs", 20,
                            "--max-steps", 2, "--beam-size", 1, "--checkpoint-dir", tmp_path / "new")
    assert rc == 0, err[-3000:]
    line = next(l for l in out.splitlines() if l.startswith("trained "))
    assert "2 updates (2 epochs) of the tiny recipe in " in line and "in all" not in line, line   # a new run


def test_evaluate_labels_each_progress_bar_with_its_set(tmp_path, capsys):
    "Two sets, two bars, each named: the bars all said \"decoding:\" before, with no word of which set."
    for name in ("flickr", "coco"):
        (tmp_path / f"{name}.de").write_text("Ein Hund läuft.\nEine Frau singt.\n", encoding="utf-8")
        (tmp_path / f"{name}.en").write_text("A dog runs.\nA woman sings.\n", encoding="utf-8")
    rc, out, err = run_main(capsys, "evaluate", "--model", "de-en", "--beam-size", 1, "--device", "cpu",
                            "--test", tmp_path / "flickr", tmp_path / "coco")
    assert rc == 0, err
    bars = {line.split(":")[0].strip() for line in err.replace("\r", "\n").splitlines() if "%|" in line}
    assert bars == {"flickr", "coco"}, err
