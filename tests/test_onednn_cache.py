"""oneDNN's primitive cache: the command line raises its capacity from 1,024 to 16,384 (`fast_model.enlarge_onednn_cache`,
called first thing) unless the user set `ONEDNN_PRIMITIVE_CACHE_CAPACITY`. A process that decodes in several settings
(float32 and bfloat16, one thread and two: the translation benchmark) otherwise evicts the primitives it is about to need
again. Importing a module does not do it (tests/test_import_side_effects.py): only the explicit call."""
import os, subprocess, sys

CALL = "import os; from annotated_transformer.fast_model import enlarge_onednn_cache as e; e(); print(os.environ['ONEDNN_PRIMITIVE_CACHE_CAPACITY'])"
IMPORT = ("import os, annotated_transformer.cli, annotated_transformer.fast_decoding\n"
          "print(os.environ.get('ONEDNN_PRIMITIVE_CACHE_CAPACITY', 'unset'))")


def run(code: str, **extra) -> str:
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"} | extra
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1]


def test_the_call_raises_the_capacity():
    assert run(CALL) == "16384"


def test_the_users_setting_wins():
    assert run(CALL, ONEDNN_PRIMITIVE_CACHE_CAPACITY="2048") == "2048"


def test_importing_leaves_it_unset():
    assert run(IMPORT) == "unset"


def test_the_command_line_calls_it():
    code = ("import os; from annotated_transformer import cli\n"
            "assert cli.main(['translate', '--beam-size', '1', 'Ein Hund.']) == 0\n"
            "print(os.environ.get('ONEDNN_PRIMITIVE_CACHE_CAPACITY', 'unset'))")
    assert run(code) == "16384"
