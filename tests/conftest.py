"""Shared set-up: a cache of the suite's own; library chatter off; models are exported and
lowered once per session through ``harness.pipeline.model.pipeline``; the command line's
default cost table (``tests.helpers.tables.TRANSITIONS_ONLY``), so that every strategy, ilp-time
included, runs wherever the tests' commands run them all.

The suite never reads or writes the user's cache as it is: ``$LAYOUTBENCH_CACHE_DIR`` is a new
directory per session, installed here as an entry installs it (:func:`layoutkit.files.install`)
for the library code the tests call, and again wherever a test changes the environment
(:func:`monkeypatch`). The kinds whose entries are keyed by everything they depend on
(exports, prefixes) are the user's, linked (a warm machine runs the suite faster, with the
same results); the tools (a built runtime, the VGF host runtime, the dashboard's scripts) are
linked where the user has them, and a test that needs one skips, saying why, where it is
missing. Records and everything else start empty, so a pass means the same on a new machine.

Under pytest-xdist (``make test`` spreads the suite over the cores) the controller makes that
cache and the table file, and its workers, which inherit its environment, use them: a model
one worker exported or lowered is loaded from disk by the other, never computed twice."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from layoutkit import files
from layoutkit.files import CacheSettings, cache_folder, cache_root

from .helpers.caches import SHARED_KINDS

TOOL_KINDS = ("runtime", "vgf-host", "npm", "arm64-device")
# xdist sets this in a worker before it reads this file; the controller set up what follows.
IN_XDIST_WORKER = "PYTEST_XDIST_WORKER" in os.environ
if not IN_XDIST_WORKER:
    files.install(CacheSettings.from_environment(os.environ))  # the user's, whose entries are linked
    _user_cache = cache_root()
    _suite_cache = Path(tempfile.mkdtemp(prefix="layoutbench-test-cache-"))
    for _kind in SHARED_KINDS + TOOL_KINDS:
        if _kind in SHARED_KINDS:
            cache_folder(_kind)  # made closed to others where missing, and refused where others can write it
        if (_user_cache / _kind).is_dir():
            (_suite_cache / _kind).symlink_to((_user_cache / _kind).resolve())
    os.environ["LAYOUTBENCH_CACHE_DIR"] = str(_suite_cache)
SUITE_CACHE = CacheSettings.from_environment(os.environ)
files.install(SUITE_CACHE)

from harness import quiet  # noqa: E402

quiet.apply(verbose=False, environment=os.environ)  # here and in every worker process the tests start
# The commands the tests start run here, not in a developer's warm server (tests/test_warm_server.py starts its own).
os.environ["LAYOUTBENCH_NO_SERVER"] = "1"

from costmodel.table import COSTS_ENV  # noqa: E402
from harness.cache import KINDS  # noqa: E402
from harness.targets.vulkan.local import runners  # noqa: E402
import models  # noqa: E402
from tests.helpers.tables import TRANSITIONS_ONLY  # noqa: E402

QUICK_ZOO = models.list_models(zoo="quick")
SMALL_MODEL = "synthetic_small"


def fast_on_the_small_model(names: list[str]) -> list:
    """Parameters over models whose full-size ones are marked slow: lowering one from an empty
    cache costs 44-415 s (docs/testing.md), so the fast tier keeps the small model's cases and
    the full tier adds the rest, asserting the same."""
    return [name if name == SMALL_MODEL else pytest.param(name, marks=pytest.mark.slow) for name in names]


if not IN_XDIST_WORKER:
    _table = os.path.join(tempfile.mkdtemp(prefix="layoutbench-costs-"), "transitions-only.json")
    with open(_table, "wb") as _file:
        _file.write(TRANSITIONS_ONLY.to_bytes())
    os.environ[COSTS_ENV] = _table  # the command line's default for --costs


@pytest.fixture(autouse=True)
def the_suites_cache_stays_installed():
    """Each test leaves the suite's cache installed: library code a later test calls in this
    process would otherwise read and write another cache, the user's where none is named."""
    yield
    left = files.cache_settings()
    files.install(SUITE_CACHE)
    assert left == SUITE_CACHE, f"the test left another cache installed: {left}"


@pytest.fixture
def monkeypatch(monkeypatch):
    """pytest's, whose changes to the environment (``setenv``, ``delenv``) also install the
    cache settings it then names, as an entry would: a test that points
    ``$LAYOUTBENCH_CACHE_DIR`` elsewhere and calls library code uses that cache. The suite's
    are installed again when the test ends."""

    def installing(change):
        def changed(*args, **kwargs):
            change(*args, **kwargs)
            files.install(CacheSettings.from_environment(os.environ))

        return changed

    monkeypatch.setenv, monkeypatch.delenv = installing(monkeypatch.setenv), installing(monkeypatch.delenv)
    yield monkeypatch
    files.install(SUITE_CACHE)


@pytest.fixture
def no_runtime(monkeypatch, tmp_path_factory):
    """No runner in the environment, on PATH or in the cache, as on a new machine: the cache is
    the suite's seen through links, all but its runtime/ folder."""
    monkeypatch.delenv(runners.RUNNER_ENV, raising=False)
    path = [d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / runners.RUNNER_NAME).exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    without_runtime = tmp_path_factory.mktemp("cache-without-runtime")
    for kind in KINDS:
        if kind != "runtime" and (cache_root() / kind).exists():
            (without_runtime / kind).symlink_to(cache_root() / kind)
    monkeypatch.setenv("LAYOUTBENCH_CACHE_DIR", str(without_runtime))
    assert "VulkanBackend" not in runners.pybindings_backends(), "this test needs a machine without ET-VK"


COLLECTED = pytest.StashKey[list]()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Keeps every collected test, before ``-m`` deselects the other tier's, for
    ``tests/test_tiers.py``."""
    config.stash[COLLECTED] = list(items)


def pytest_sessionfinish(session, exitstatus):
    if not IN_XDIST_WORKER:  # the controller ends last, once every worker is done with the cache
        shutil.rmtree(_suite_cache, ignore_errors=True)  # the links only, not what they point to
