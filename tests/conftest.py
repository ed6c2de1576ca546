"""`pytest tests` runs on two workers (pyproject's addopts: `-n 2 --dist loadgroup`). Each module's tests go to one
worker together, so that a module's fixtures (a trained model, a rendered site, a browser) are built once; a test
marked `spread` (one seed of a long training, say) goes to whichever worker is free."""
import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "spread: may run on another worker than the rest of its module")


def pytest_collection_modifyitems(items):
    for item in items:
        if not item.get_closest_marker("spread"): item.add_marker(pytest.mark.xdist_group(item.module.__name__))
