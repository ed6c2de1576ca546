"""Running the command line in the tests' own process, and reading what it said: shared by the end-to-end tests."""
import re

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
    "stderr without progress bars (tqdm rewrites its line with \\r): train's and decoding's."
    lines = (l.rsplit("\r", 1)[-1] for l in err.split("\n"))
    return [l for l in lines if l.strip() and not re.match(r"^\s*(train|decoding)\b.*\|", l)]


def stop_at_batch(monkeypatch, n: int):
    "Ctrl-C during the n-th batch's search (the torch engine looks its search up at each batch, in its module)."
    real, calls = engines.fast_beam_search, []
    def search(*a, **k):
        calls.append(1)
        if len(calls) == n: raise KeyboardInterrupt
        return real(*a, **k)
    monkeypatch.setattr(engines, "fast_beam_search", search)
