"""Chapter 35's recipe for the browser page ("Running the page locally"), run by bash with stand-ins for the commands it
calls: without Quarto it says so and renders with tools/render_docs.py, instead of ending in `nbdev-docs`' Python
traceback; with Quarto it builds the site with `nbdev-docs`, as the deploy workflow does."""
import json, shutil, subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STANDINS = ("pip", "npm", "annotated-transformer", "nbdev-docs", "python")   # each records its arguments, does nothing


def recipe() -> str:
    "The shell block of chapter 35's 'Running the page locally', as a reader pastes it."
    cells = json.loads((ROOT / "nbs/35_onnx_export.ipynb").read_text(encoding="utf-8"))["cells"]
    text = next("".join(c["source"]) for c in cells if "## Running the page locally" in "".join(c["source"]))
    return text.split("## Running the page locally", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]


def run_recipe(tmp_path: Path, quarto: bool) -> tuple[subprocess.CompletedProcess, list[str]]:
    "The recipe in a stand-in clone, PATH holding only the stand-ins and cp (and a `quarto` where asked): (result, calls)."
    bash = shutil.which("bash")
    if not bash: pytest.skip("no bash")
    bin_, log, clone = tmp_path / "bin", tmp_path / "calls.log", tmp_path / "clone"
    bin_.mkdir()
    for name in STANDINS + (("quarto",) if quarto else ()):
        (bin_ / name).write_text(f'#!/bin/sh\necho "{name} $*" >> "{log}"\n')
        (bin_ / name).chmod(0o755)
    (bin_ / "cp").symlink_to(shutil.which("cp"))
    (clone / "web" / "dist").mkdir(parents=True)
    (clone / "_docs").mkdir()
    r = subprocess.run([bash, "-c", recipe()], cwd=clone, env={"PATH": str(bin_), "HOME": str(tmp_path)},
                       capture_output=True, text=True, timeout=60)
    return r, (log.read_text().splitlines() if log.exists() else [])


def test_without_quarto_the_recipe_says_so_and_renders_with_pandoc(tmp_path):
    r, calls = run_recipe(tmp_path, quarto=False)
    said = r.stdout + r.stderr
    assert "Quarto is not installed" in said and "tools/render_docs.py" in said, (said, calls)
    assert not any(c.startswith("nbdev-docs") for c in calls), calls            # its traceback, without Quarto
    assert "python tools/render_docs.py --process" in calls, calls
    assert calls[-1] == "python -m http.server -d test-output/docs/html", calls
    assert "Traceback" not in said and "not found" not in said, said


def test_with_quarto_the_recipe_builds_the_site_as_the_deploy_workflow(tmp_path):
    r, calls = run_recipe(tmp_path, quarto=True)
    assert "nbdev-docs " in calls and not any("render_docs" in c for c in calls), calls
    assert (tmp_path / "clone" / "_docs" / "browser").is_dir()                  # web/dist beside the site
    assert calls[-1] == "python -m http.server -d _docs", (calls, r.stderr)
