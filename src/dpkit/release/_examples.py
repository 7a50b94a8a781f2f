"""Real mixed-type tables for examples, the demo and tests (no download).

* The RAND Health Insurance Experiment subset (Cameron and Trivedi 2005), in the public domain,
  ships with dpkit (``dpkit/release/data/randhie.csv.gz``, 52 KB; its README says where it comes
  from): 20,190 person-years, 10 columns; four are 0/1 flags, ``mdvis`` (doctor visits) is 0 for
  about a third of the records and ``lpi``, ``fmde`` for a quarter and more: point masses a
  synthesiser must not smear over a bin. :func:`load_randhie`, :func:`randhie_domain`.
* Fair (1978), "A Theory of Extramarital Affairs", *Journal of Political Economy* 86, 45–61:
  6,366 women surveyed by *Redbook* in 1974, as shipped in ``statsmodels.datasets.fair``
  (included there with the author's permission, which does not extend to dpkit: it is read
  from statsmodels, which dpkit's tests and benchmarks install, never shipped).
  :func:`load_fair`, :func:`fair_domain`.
"""

from __future__ import annotations

import gzip
import importlib
from importlib import resources
from typing import Any

import numpy as np

from dpkit.release._domain import Categorical, Domain, Numeric

__all__ = ["fair_domain", "load_fair", "load_randhie", "randhie_domain"]

RANDHIE_FLAGS = ("idp", "hlthg", "hlthf", "hlthp")
"""The 0/1 columns of :func:`load_randhie` (integers; the others are floats)."""


def randhie_domain() -> Domain:
    """The public domain of :func:`load_randhie`, from the codebook's ranges (not the data).

    Visits and chronic-disease counts with generous caps, the log coinsurance rates (5 plans,
    0–95 %) in bins that keep them apart, the log payments and deductibles with an atom at 0.

    Examples
    --------
    >>> randhie_domain().shape
    (9, 10, 2, 9, 10, 5, 10, 2, 2, 2)
    """
    flag = Categorical((0, 1))
    return Domain(
        {
            "mdvis": Numeric(0.0, 40.0, bins=8, atoms=(0.0,)),
            "lncoins": Numeric(0.0, 4.7, bins=10),
            "idp": flag,
            "lpi": Numeric(0.0, 8.0, bins=8, atoms=(0.0,)),
            "fmde": Numeric(0.0, 9.0, bins=9, atoms=(0.0,)),
            "physlm": Numeric(0.0, 1.0, bins=4, atoms=(0.0,)),
            "disea": Numeric(0.0, 60.0, bins=10),
            "hlthg": flag,
            "hlthf": flag,
            "hlthp": flag,
        }
    )


def load_randhie() -> Any:
    """The RAND Health Insurance Experiment subset as a pandas DataFrame (flags as ints).

    Public domain; shipped with dpkit (needs only pandas, ``pip install 'dpkit[release]'``).

    Examples
    --------
    >>> df = load_randhie()
    >>> df.shape, float(df["mdvis"].eq(0).mean()).__round__(3)
    ((20190, 10), 0.312)
    """
    try:
        pd = importlib.import_module("pandas")
    except ImportError:  # pragma: no cover - pandas ships with the release extra
        raise ImportError("load_randhie needs pandas: pip install 'dpkit[release]'") from None
    raw = resources.files("dpkit.release").joinpath("data/randhie.csv.gz").read_bytes()
    lines = gzip.decompress(raw).decode("ascii").splitlines()
    header = lines[0].split(",")
    values = np.array([line.split(",") for line in lines[1:]], dtype=np.float64)
    df = pd.DataFrame(values, columns=header)
    for k in RANDHIE_FLAGS:
        df[k] = df[k].round().astype(int)
    return df


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

    Needs statsmodels (``pip install statsmodels``; not a dependency of dpkit: the data's
    licence does not let dpkit ship them).
    """
    try:
        fair = importlib.import_module("statsmodels.datasets.fair")
    except ImportError:  # pragma: no cover - the test environment installs statsmodels
        raise ImportError("load_fair needs statsmodels: pip install statsmodels") from None
    df = fair.load_pandas().data.copy()
    for k in ("rate_marriage", "religious", "occupation", "occupation_husb"):
        df[k] = df[k].round().astype(int)
    return df
