"""`pytest tests` runs on two workers (pyproject's addopts: `-n 2`). Each module's tests go to one worker together,
so that a module's fixtures (a trained model, a rendered site, a browser) are built once; the tests in `SPREAD` (the
seeds of a long training) go one by one to whichever worker is free.

The grouping is xdist's `loadscope` scheduler with its scope chosen here. (`--dist loadgroup` with `xdist_group` marks
does not group under pytest 9.2: pytest-xdist issue 1386.)

The project's rule for CI lives here, not in the library: under `CI=true` the tests run the full-data checks, so a run
without a data root ($ANNOTATED_TRANSFORMER_DATA) is refused before any test, instead of falling back to the shipped
sample without a word. (A user's own CI that imports the package is not held to it.)"""
import os

import pytest

DATA_ENV = "ANNOTATED_TRANSFORMER_DATA"


def pytest_configure(config):
    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes") and not os.environ.get(DATA_ENV):
        raise pytest.UsageError(f"CI=true but ${DATA_ENV} is not set: CI runs the full-data checks, so it must "
                                f"pass the data root (a folder holding multi30k/; .ci/run sets it)")

SPREAD = ("tests/test_copy_cli.py::test_copy_reaches_exact_match_on_every_seed[",)


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        "A work unit per module, except a test in `SPREAD`: a unit of its own."
        def _split_scope(self, nodeid: str) -> str:
            return nodeid if nodeid.startswith(SPREAD) else nodeid.split("::", 1)[0]

    return ByModule(config, log)
