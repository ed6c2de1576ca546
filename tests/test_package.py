"The package installs (not editable) and imports from another directory; the CLI answers --version and --help."
import subprocess, sys, os
from pathlib import Path
import annotated_transformer

ROOT = Path(__file__).resolve().parents[1]


def run(*args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def test_non_editable_install_imports_from_elsewhere(tmp_path):
    target = tmp_path / "site"
    r = run(sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target), str(ROOT))
    assert r.returncode == 0, r.stderr
    env = {**os.environ, "PYTHONPATH": str(target)}
    r = run(sys.executable, "-c", "import annotated_transformer as a; print(a.__file__, a.__version__)", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert str(target) in r.stdout and annotated_transformer.__version__ in r.stdout
    r = run(sys.executable, "-m", "annotated_transformer", "--version", cwd=tmp_path, env=env)
    assert r.returncode == 0 and annotated_transformer.__version__ in r.stdout


def test_console_script_version_and_help():
    exe = Path(sys.executable).parent / "annotated-transformer"
    r = run(str(exe), "--version")
    assert r.returncode == 0 and r.stdout.strip() == f"annotated-transformer {annotated_transformer.__version__}"
    r = run(str(exe), "--help")
    assert r.returncode == 0 and "usage: annotated-transformer" in r.stdout


def test_the_cli_imports_the_chapters_and_no_chapter_imports_the_cli():
    "One direction only: cli.py imports the chapters (real imports, no dispatch by string); no chapter imports the CLI."
    import re
    pkg = Path(annotated_transformer.__file__).parent
    cli = (pkg / "cli.py").read_text(encoding="utf-8")
    assert "importlib" not in cli and "import_module" not in cli
    for mod in ("copy_task", "multi30k", "model_variations", "attention_maps", "performance", "ctranslate2_export"):
        assert re.search(rf"^from (\.|annotated_transformer\.){mod} import", cli, re.M), mod
    for f in pkg.glob("*.py"):
        if f.name in ("cli.py", "__main__.py", "_modidx.py"): continue
        assert not re.search(r"from \.cli import|annotated_transformer\.cli", f.read_text(encoding="utf-8")), f.name
