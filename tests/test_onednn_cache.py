"""oneDNN's primitive cache (issue 24): importing `annotated_transformer.decoding` raises its capacity from 1,024 to
16,384 unless the user set `ONEDNN_PRIMITIVE_CACHE_CAPACITY`. A process that decodes in several settings (float32 and
bfloat16, one thread and two: chapter 34's benchmark) otherwise evicts the primitives it is about to need again; two
forked float32 workers in that benchmark ran at 87-100 sentences/s against 126-131 with the larger cache."""
import os, subprocess, sys

CODE = "import os, annotated_transformer.decoding; print(os.environ['ONEDNN_PRIMITIVE_CACHE_CAPACITY'])"


def capacity(**extra) -> str:
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"} | extra
    r = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_import_raises_the_capacity():
    assert capacity() == "16384"


def test_the_users_setting_wins():
    assert capacity(ONEDNN_PRIMITIVE_CACHE_CAPACITY="2048") == "2048"
