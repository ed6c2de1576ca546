"""Running the command line in the tests' own process, and reading what it said: shared by the end-to-end tests."""
import gzip, os, re
from pathlib import Path

import pytest

import annotated_transformer.engines as engines
from annotated_transformer.cli import main


def run_main(capsys, *argv):
    "`cli.main` in process: (exit status, stdout, stderr); argparse's SystemExit becomes its status."
    capsys.readouterr()
    try: rc = main([str(a) for a in argv])
    except SystemExit as e: rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def messages(err: str) -> list[str]:
    "stderr without progress bars (tqdm rewrites its line with \\r): train's, decoding's, and evaluate's per set."
    lines = (l.rsplit("\r", 1)[-1] for l in err.split("\n"))
    return [l for l in lines if l.strip() and not re.match(r"^\s*(train|decoding)\b.*\||^\s*[\w./-]+: +\d+%\|", l)]


def stop_at_batch(monkeypatch, n: int):
    "Ctrl-C during the n-th batch's search (the torch engine looks its search up at each batch, in its module)."
    real, calls = engines.fast_beam_search, []
    def search(*a, **k):
        calls.append(1)
        if len(calls) == n: raise KeyboardInterrupt
        return real(*a, **k)
    monkeypatch.setattr(engines, "fast_beam_search", search)


def val_lines(n: int, lang: str = "de") -> list[str]:
    "The first n lines of Multi30k's validation set in `lang` from the data root; the test is skipped without one."
    path = Path(os.environ.get("ANNOTATED_TRANSFORMER_DATA", "")) / "multi30k" / f"val.{lang}.gz"
    if not path.is_file(): pytest.skip(f"no Multi30k validation file at {path}")
    with gzip.open(path, "rt", encoding="utf-8") as f: return [next(f).rstrip("\n") for _ in range(n)]
