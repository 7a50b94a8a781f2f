"""A real mixed-type table for examples and tests, bundled with statsmodels (no download).

Fair (1978), "A Theory of Extramarital Affairs", *Journal of Political Economy* 86, 45–61:
6,366 women surveyed by *Redbook* in 1974, as shipped in ``statsmodels.datasets.fair``
(included there with the author's permission). Four columns are coded categories, four are
numeric, and ``affairs`` (time spent in affairs) is 0 for about two thirds of the records: the
point mass a synthesiser must not smear over a bin.
"""

from __future__ import annotations

import importlib
from typing import Any

from dpkit.release._domain import Categorical, Domain, Numeric

__all__ = ["fair_domain", "load_fair"]


def fair_domain() -> Domain:
    """The public domain of :func:`load_fair`, from the survey's codebook (not from the data).

    Examples
    --------
    >>> fair_domain().shape
    (5, 8, 8, 6, 4, 6, 6, 6, 9)
    """
    return Domain(
        {
            "rate_marriage": Categorical((1, 2, 3, 4, 5)),
            "age": Numeric(17.5, 42.0, bins=8),
            "yrs_married": Numeric(0.0, 23.0, bins=8),
            "children": Numeric(0.0, 6.0, bins=6),
            "religious": Categorical((1, 2, 3, 4)),
            "educ": Numeric(9.0, 20.0, bins=6),
            "occupation": Categorical((1, 2, 3, 4, 5, 6)),
            "occupation_husb": Categorical((1, 2, 3, 4, 5, 6)),
            "affairs": Numeric(0.0, 60.0, bins=8, atoms=(0.0,)),
        }
    )


def load_fair() -> Any:
    """Fair's affairs data as a pandas DataFrame (categorical codes as ints).

    Needs statsmodels (``pip install 'dpkit[release]'``).
    """
    try:
        fair = importlib.import_module("statsmodels.datasets.fair")
    except ImportError:  # pragma: no cover - statsmodels ships with the release extra
        raise ImportError("load_fair needs statsmodels: pip install 'dpkit[release]'") from None
    df = fair.load_pandas().data.copy()
    for k in ("rate_marriage", "religious", "occupation", "occupation_husb"):
        df[k] = df[k].round().astype(int)
    return df
