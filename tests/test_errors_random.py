"""The exception tree and the rng= convention."""

from __future__ import annotations

import numpy as np
import pytest

import dpkit
from dpkit import errors
from dpkit.random import as_generator, is_secure, secure_generator, seeded_generator


def test_error_tree() -> None:
    assert issubclass(errors.PrivacyParameterError, errors.DPKitError)
    assert issubclass(errors.PrivacyParameterError, ValueError)
    assert issubclass(errors.DataError, ValueError)
    assert issubclass(errors.BudgetExceededError, errors.DPKitError)
    assert not issubclass(errors.BudgetExceededError, ValueError)


def test_none_is_secure_and_fresh() -> None:
    a, b = as_generator(None), as_generator(None)
    assert is_secure(a) and is_secure(b)
    # Two secure generators are keyed independently from the OS.
    assert not np.array_equal(a.integers(0, 2**63, 8), b.integers(0, 2**63, 8))


def test_seed_reproducible_and_not_secure() -> None:
    a, b = seeded_generator(3), as_generator(3)
    assert np.array_equal(a.integers(0, 2**63, 8), b.integers(0, 2**63, 8))
    assert not is_secure(a)


def test_generator_passthrough() -> None:
    g = np.random.default_rng(1)
    assert as_generator(g) is g
    assert not is_secure(g)
    assert is_secure(secure_generator())


@pytest.mark.parametrize("bad", [-1, 1.5, "7", True])
def test_bad_rng(bad: object) -> None:
    with pytest.raises(errors.PrivacyParameterError, match="rng"):
        as_generator(bad)  # type: ignore[arg-type]


def _isort_key(name: str) -> tuple[int, str]:
    # ruff's RUF022 order: CONSTANTS, then Classes, then everything else, each alphabetical
    if name.isupper() and len(name) > 1:
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name)


def test_every_public_all_is_sorted_and_resolves() -> None:
    import importlib
    import pkgutil

    for info in pkgutil.walk_packages(dpkit.__path__, "dpkit."):
        if info.name.rsplit(".", 1)[-1].startswith("_") or info.name.endswith("__main__"):
            continue
        mod = importlib.import_module(info.name)
        names = list(getattr(mod, "__all__", []))
        assert names == sorted(names, key=_isort_key), info.name
        for name in names:
            assert hasattr(mod, name), (info.name, name)
