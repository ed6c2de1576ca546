"""`pytest tests` runs on two workers (pyproject's addopts: `-n 2`). Each module's tests go to one worker together,
so that a module's fixtures (a trained model, a rendered site, a browser) are built once; the tests in `SPREAD` (the
seeds of a long training) go one by one to whichever worker is free.

The grouping is xdist's `loadscope` scheduler with its scope chosen here. (`--dist loadgroup` with `xdist_group` marks
does not group under pytest 9.2: pytest-xdist issue 1386.)"""

SPREAD = ("tests/test_copy_cli.py::test_copy_reaches_exact_match_on_every_seed[",)


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        "A work unit per module, except a test in `SPREAD`: a unit of its own."
        def _split_scope(self, nodeid: str) -> str:
            return nodeid if nodeid.startswith(SPREAD) else nodeid.split("::", 1)[0]

    return ByModule(config, log)
