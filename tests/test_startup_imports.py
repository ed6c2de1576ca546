"""The command line starts at once: `annotated-transformer --help` imports no PyTorch, and `translate` neither the
plotting library nor the benchmarks (nor training, the lab or the exports' commands). `main` imports only the module
of the command it runs (chapter 92); these tests run it in a fresh process and read `sys.modules` after it.
How long each takes is a measurement, not a test: `annotated-transformer bench --startup` (its option is tested here
with one run)."""
import json, subprocess, sys

import pytest

PROBE = r'''
import contextlib, io, json, sys
from annotated_transformer.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
    try: rc = main(sys.argv[1:])
    except SystemExit as e: rc = e.code
print(json.dumps({"rc": rc, "out": out.getvalue(), "modules": sorted(sys.modules)}))
'''
PLOTS_AND_BENCHES = ("matplotlib", "annotated_transformer.benchmarking", "annotated_transformer.attention_maps",
                     "annotated_transformer.why_self_attention", "annotated_transformer.performance",
                     "annotated_transformer.speed_levers")
OTHER_COMMANDS = ("annotated_transformer.cli_train", "annotated_transformer.cli_lab", "annotated_transformer.cli_tools",
                  "annotated_transformer.training", "annotated_transformer.multi30k", "annotated_transformer.copy_task",
                  "annotated_transformer.model_variations", "annotated_transformer.exercises",
                  "annotated_transformer.exercises_model", "annotated_transformer.exercises_training",
                  "annotated_transformer.exercises_translation")


def run(*argv) -> dict:
    "`main(argv)` in a fresh interpreter: its exit status, what it printed, and every module it had imported."
    r = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def loaded(res: dict, names) -> list[str]:
    "Which of `names` (modules, or packages with their submodules) the run imported."
    return [n for n in names if any(m == n or m.startswith(n + ".") for m in res["modules"])]


@pytest.mark.parametrize("argv", [["--help"], [], ["--version"]])
def test_help_imports_no_torch(argv):
    res = run(*argv)
    assert res["rc"] == 0 and res["out"].startswith(("usage: annotated-transformer", "annotated-transformer "))
    assert not loaded(res, ("torch", "numpy", "fastcore", *PLOTS_AND_BENCHES, *OTHER_COMMANDS))
    assert [m for m in res["modules"] if m.startswith("annotated_transformer")] == \
        ["annotated_transformer", "annotated_transformer.cli"]


def test_translate_imports_no_plots_no_benchmarks():
    res = run("translate", "Ein Hund läuft.")
    assert res["rc"] == 0 and res["out"].strip(), res
    assert "torch" in res["modules"] and "annotated_transformer.cli_translate" in res["modules"]
    assert not loaded(res, (*PLOTS_AND_BENCHES, *OTHER_COMMANDS))


def test_a_commands_help_imports_only_its_module():
    res = run("translate", "--help")
    assert res["rc"] == 0 and "--n-best" in res["out"]
    assert not loaded(res, (*PLOTS_AND_BENCHES, *OTHER_COMMANDS))


def test_the_probe_sees_an_import():
    "The check itself: the lab's command brings the benchmarks and matplotlib."
    res = run("bench", "--help")
    assert loaded(res, ("matplotlib", "annotated_transformer.benchmarking", "annotated_transformer.cli_lab")) == \
        ["matplotlib", "annotated_transformer.benchmarking", "annotated_transformer.cli_lab"]


def test_bench_startup_prints_the_table(capsys, tmp_path):
    "`bench --startup --runs 1`: the three commands, each timed once after a warm-up, as a table and as JSON."
    from annotated_transformer.cli import main
    assert main(["bench", "--startup", "--runs", "1", "--output", str(tmp_path / "s.json")]) == 0
    table = capsys.readouterr().out
    res = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    assert [r["command"] for r in res["rows"]] == ['python -c "import torch"', "annotated-transformer --help",
                                                    'annotated-transformer translate "Ein Hund läuft."']
    assert res["runs"] == 1 and all(len(r["times_s"]) == 1 and r["median_s"] > 0 for r in res["rows"])
    hw = res["hardware"]
    assert f"{hw['cpu']} ({hw['vendor']}), CPU capability {hw['capability']}" in table.splitlines()[0]
    assert "| `annotated-transformer --help` |" in table and table.rstrip().endswith("`startup_times(runs=1)`")
