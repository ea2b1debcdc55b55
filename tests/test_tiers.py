"""The two tiers (docs/testing.md): `make test` runs the tests not marked ``slow``, `make
test-all` every test. A file whose every test is slow drops out of the fast tier unseen, so
each file keeps one fast test, or says in one line why it cannot (``FULL_TIER_ONLY``)."""

from pathlib import Path

import pytest

from .conftest import COLLECTED


def files_without_a_fast_test(items) -> list[str]:
    """The test files among ``items`` whose every test is marked slow and which do not say why
    (a module-level ``FULL_TIER_ONLY`` string)."""
    slow_only, modules = {}, {}
    for item in items:
        path = Path(item.fspath)
        slow_only[path] = slow_only.get(path, True) and item.get_closest_marker("slow") is not None
        modules[path] = item.module
    return sorted(path.name for path, only in slow_only.items()
                  if only and not getattr(modules[path], "FULL_TIER_ONLY", ""))


def test_every_test_file_keeps_a_fast_test(request):
    collected = request.config.stash[COLLECTED]
    assert len({Path(item.fspath) for item in collected}) > 0
    assert files_without_a_fast_test(collected) == []


class _Item:
    """What the rule reads of a collected test."""

    def __init__(self, fspath, module, slow):
        self.fspath, self.module, self._slow = fspath, module, slow

    def get_closest_marker(self, name):
        return pytest.mark.slow.mark if name == "slow" and self._slow else None


class _Module:
    def __init__(self, why=None):
        if why:
            self.FULL_TIER_ONLY = why


def test_a_file_of_only_slow_tests_is_found_unless_it_says_why():
    mixed, only_slow, explained = _Module(), _Module(), _Module("the Arm toolchain's first lowering is the test")
    items = [_Item("tests/test_mixed.py", mixed, True), _Item("tests/test_mixed.py", mixed, False),
             _Item("tests/test_only_slow.py", only_slow, True), _Item("tests/test_only_slow.py", only_slow, True),
             _Item("tests/test_explained.py", explained, True)]
    assert files_without_a_fast_test(items) == ["test_only_slow.py"]
