"""dpkit: differential privacy done exactly.

``import dpkit as dp`` reaches the common path; submodules hold the rest:

* :mod:`dpkit.random` — secure default randomness;
* :mod:`dpkit.noise` — exact integer samplers and float-safe real noise;
* :mod:`dpkit.errors` — the exception tree.
"""

from __future__ import annotations

from dpkit import errors, noise, random
from dpkit.errors import BudgetExceededError, DataError, DPKitError, PrivacyParameterError

__version__ = "0.1.0"

__all__ = [
    "BudgetExceededError",
    "DPKitError",
    "DataError",
    "PrivacyParameterError",
    "__version__",
    "errors",
    "noise",
    "random",
]
