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
