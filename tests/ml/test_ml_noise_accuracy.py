"""GaussianNB.accuracy before fitting: the coverage of the noisy class counts of actual fits.

60 fits × 20 classes = 1200 noisy counts (about 100 records a class, far from the clamp at 0)
at alpha = 0.1 must lie within ±4 binomial sd (√(0.09/1200) ≈ 0.0087) of [0.9, 0.93] (the
half-width is the smallest integer quantile of the noise, which can add the probability of its
last integer).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.errors import PrivacyParameterError
from dpkit.ml import GaussianNB

ALPHA = 0.1
CLASSES = list(range(20))
FITS = 60


def test_class_counts_cover_like_the_fits() -> None:
    g = np.random.default_rng(0)
    y = g.integers(0, len(CLASSES), 2000)
    X = g.uniform(0, 1, (2000, 2))
    exact = np.bincount(y, minlength=len(CLASSES))
    model = GaussianNB(epsilon=2.0, bounds=(0, 1), classes=CLASSES)
    h = model.accuracy(ALPHA, n_features=2)["class_count"]
    hits = []
    for seed in range(FITS):
        nb = GaussianNB(epsilon=2.0, bounds=(0, 1), classes=CLASSES, rng=seed).fit(X, y)
        hits.append(np.abs(nb.class_count_ - exact) <= h)
    cov = float(np.mean(hits))
    band = 4 * math.sqrt(ALPHA * (1 - ALPHA) / (FITS * len(CLASSES)))
    assert 1 - ALPHA - band <= cov <= 1 - ALPHA + 0.03 + band


def test_accuracy_needs_public_parameters() -> None:
    with pytest.raises(PrivacyParameterError):
        GaussianNB(epsilon=1.0, bounds=(0, 1), classes=[0, 1]).accuracy(n_features=0)
    with pytest.raises(PrivacyParameterError):
        GaussianNB(epsilon=1.0, classes=[0, 1]).accuracy(n_features=2)
    acc = GaussianNB(epsilon=1.0, bounds=(0, 1), classes=[0, 1]).accuracy(n_features=2)
    assert set(acc) == {"class_count", "sums", "squares"} and all(v > 0 for v in acc.values())
