"""`--early-stop` on `translate` and `evaluate` (chapters 14, 15, 92): both commands offer it, and the shipped de→en model
translates with and without it. Chapter 92 checks that the flag reaches the search and `evaluate --json`'s record."""
import os, subprocess, sys
from pathlib import Path
import pytest

EXE = Path(sys.executable).parent / "annotated-transformer"
SENTENCE = "Ein Hund läuft."


def cli(*args):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.run([str(EXE), *map(str, args)], capture_output=True, text=True, timeout=600, env=env)


@pytest.mark.parametrize("flags", [[], ["--early-stop"]], ids=["exact-rule", "early-stop"])
def test_translate_with_and_without_early_stop(flags):
    r = cli("translate", "--model", "de-en", "--device", "cpu", *flags, SENTENCE)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 1 and "dog" in lines[0].lower(), r.stdout


@pytest.mark.parametrize("command", ["translate", "evaluate"])
def test_help_offers_early_stop(command):
    r = cli(command, "--help")
    assert r.returncode == 0, r.stderr
    assert "--early-stop" in r.stdout and "K finished" in " ".join(r.stdout.split()), r.stdout
