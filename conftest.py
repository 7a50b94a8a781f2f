"""Suite-wide pytest configuration.

Tests and doctests seed their noise on purpose, often while charging an accountant, which raises
``dpkit.errors.InsecureRandomnessWarning``. pyproject's ``filterwarnings`` ignores it, but a
command-line ``-W error`` (as ``make test`` passes) takes precedence over that setting, so the
same filter is also given to every test as a marker, which pytest applies last. It is prepended,
so a test's own ``filterwarnings`` marker still wins, and ``pytest.warns`` sees the warning
regardless.
"""

from __future__ import annotations

import pytest

_IGNORE = pytest.mark.filterwarnings("ignore::dpkit.errors.InsecureRandomnessWarning")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(_IGNORE, append=False)
