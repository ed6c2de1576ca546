"""§6.2 from the shell: `annotated-transformer variations` runs Table 3 variants, writes each record as it arrives, skips
what its results file already holds, and refuses a row or base it does not know. Seconds-long: a width-32 model, 2
updates, on the sample that ships with the package (the sweep itself is the chapter's, not CI's)."""
import json, os, subprocess, sys
from pathlib import Path
from annotated_transformer.data import SAMPLE_DIR

EXE = Path(sys.executable).parent / "annotated-transformer"
TINY = ["--steps", "2", "--base", "n_layers=1,d_model=32,d_ff=64,n_heads=8", "--max-train-pairs", "100",
        "--max-eval-sentences", "10", "--data-dir", str(SAMPLE_DIR)]


def cli(*args):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([str(EXE), "variations", *map(str, args)], capture_output=True, text=True, timeout=600, env=env)


def test_runs_records_and_skips(tmp_path):
    results = tmp_path / "v.json"
    r = cli("--rows", "E,A-h1", "--results", results, "--json", *TINY)
    assert r.returncode == 0, r.stderr
    recs = json.loads(r.stdout)
    assert [x["name"] for x in recs] == ["A-h1", "E-learned"]
    assert recs[1]["model"]["positional"] == "learned" and recs[0]["model"]["n_heads"] == 1
    for x in recs:
        assert x["steps"] == 2 and x["seed"] == 0 and x["dev_ppl"] > 1
        for k in ("command", "hardware", "capability", "torch", "threads", "minutes", "parameters", "dev_bleu"): assert k in x
        assert x["command"].startswith(f"annotated-transformer variations --rows {x['name']} --seeds 0 --steps 2 --base ")
    assert [x["name"] for x in json.loads(results.read_text())["runs"]] == ["A-h1", "E-learned"]
    again = cli("--rows", "E,A-h1", "--results", results, "--json", *TINY)
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("skipped") == 2 and json.loads(again.stdout) == recs


def test_refuses_unknown_rows_and_bases(tmp_path):
    r = cli("--rows", "F", "--results", tmp_path / "v.json", *TINY)
    assert r.returncode == 1 and "unknown row or variant 'F'" in r.stderr and "Traceback" not in r.stderr
    bad_base = [a if a != "n_layers=1,d_model=32,d_ff=64,n_heads=8" else "layers=1" for a in TINY]
    r = cli("--rows", "E", "--results", tmp_path / "v.json", *bad_base)
    assert r.returncode == 1 and "is not FIELD=INTEGER" in r.stderr
    r = cli("--rows", "E", "--seeds", "x", "--results", tmp_path / "v.json", *TINY)
    assert r.returncode == 1 and "--seeds x" in r.stderr
    assert not (tmp_path / "v.json").exists()
