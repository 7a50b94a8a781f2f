"""Heavy hitters by prefix extension (PEM): finds what its error bound promises, audited."""

from __future__ import annotations

import numpy as np
import pytest

from dpkit.audit import Predicate, epsilon_lower_bound
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.local import OUE, PrefixExtension
from dpkit.local._heavy import _hash


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_finds_items_above_the_error_bound(seed):
    pem = PrefixExtension(epsilon=3.0, length=3, top=8, step=4)
    rng = np.random.default_rng(seed)
    heavy = {"abc": 14_000, "xyz": 10_000, "q!": 8_000}
    # 40,000 users with distinct random 3-letter words as background
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    background = ["".join(rng.choice(letters, 3)) for _ in range(40_000)]
    words = [w for w, c in heavy.items() for _ in range(c)] + background
    n = len(words)
    found = pem.identify(pem.randomize(words, rng=seed))
    bound = 2 * pem.threshold(n, beta=0.05)
    for w, c in heavy.items():
        assert c > bound  # the test's items are above the documented bound …
        assert w in found.items  # … so they must be found (probability ≥ 95% each run)
        est = found.counts[found.items.index(w)]
        assert abs(est - c) < 5 * found.std
    assert found.std == pytest.approx(pem.sigma(n), rel=0.1)


def test_one_report_audit():
    pem = PrefixExtension(epsilon=1.0, length=1, top=2, step=4)
    assert pem.bits == [1, 5, 8]
    x0, x1 = pem.encode("a"), pem.encode("Q")  # differ in the first bits

    def mech(v, n, rng):
        return pem.randomize([v] * n, rng=rng).values

    def region_fn(r):
        shift = 8 - np.asarray(pem.bits)[r[:, 0]]
        h0 = _hash(r[:, 1], r[:, 2], r[:, 3], x0 >> shift, pem.g)
        h1 = _hash(r[:, 1], r[:, 2], r[:, 3], x1 >> shift, pem.g)
        return (h1 == r[:, 4]) & (h0 != r[:, 4])

    res = epsilon_lower_bound(
        mech, "a", "Q", trials=100_000, rng=3, region=Predicate(region_fn, name="supports Q only")
    )
    assert 0.4 <= res.epsilon <= 1.0, res


def test_bad_input():
    for bad in ({"length": 8}, {"top": 0}, {"step": 0}, {"epsilon": 0.0}):
        kw = {"epsilon": 1.0, **bad}
        with pytest.raises(PrivacyParameterError):
            PrefixExtension(**kw)
    pem = PrefixExtension(epsilon=1.0, length=2, top=2, step=4)
    pem.randomize(["toolong"], rng=0)  # cut to its declared length, never refused
    with pytest.raises(DataError):
        pem.randomize("ab", rng=0)
    with pytest.raises(DataError):
        pem.randomize(["ab", 3], rng=0)
    with pytest.raises(DataError):
        pem.identify(np.zeros((0, 5), dtype=int))
    with pytest.raises(DataError):
        pem.identify(np.array([[9, 1, 1, 1, 0]]))
    with pytest.raises(DataError):
        pem.identify(OUE(epsilon=1.0, k=4).randomize([1], rng=0))
    with pytest.raises(DataError):
        PrefixExtension(epsilon=2.0, length=2, top=2, step=4).identify(pem.randomize(["ab"], rng=0))
    with pytest.raises(PrivacyParameterError):
        pem.threshold(100, beta=0.0)
