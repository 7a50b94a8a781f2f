"""The dpkit exception tree.

Every error dpkit raises derives from :class:`DPKitError`. Errors about bad arguments also derive
from :class:`ValueError`, so code that already catches ``ValueError`` keeps working. Each message
says what was wrong *and* how to fix it. When one of these is raised, nothing has been released and
no budget has been charged.

>>> from dpkit.errors import PrivacyParameterError
>>> issubclass(PrivacyParameterError, ValueError)
True
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "DPKitError",
    "DataError",
    "InsecureRandomnessWarning",
    "PrivacyParameterError",
    "PrivacyWarning",
    "QueryRefusedError",
]


class DPKitError(Exception):
    """Base class of every error raised by dpkit."""


class PrivacyParameterError(DPKitError, ValueError):
    """A privacy parameter (ε, δ, ρ, a scale, a sensitivity, a sampling rate…) is invalid.

    Raised at construction, before any data are seen.
    """


class DataError(DPKitError, ValueError):
    """The data cannot be processed as the privacy analysis assumes.

    Examples: NaN or infinite values, ``None``, an empty array, missing or reversed bounds, an
    array of the wrong shape.
    """


class QueryRefusedError(DataError):
    """A SQL query is refused: its privacy cannot be guaranteed, or it is not supported.

    Raised by :mod:`dpkit.sql` from the query text and the public table metadata only (never
    from the data), before anything is read or charged. The message says which construct is
    refused and what to write instead.
    """


class BudgetExceededError(DPKitError):
    """A charge would overspend a privacy budget; the charge was not recorded.

    Attributes
    ----------
    requested, remaining :
        Descriptions of what was asked for and what is left.
    """

    def __init__(self, message: str, *, requested: object = None, remaining: object = None):
        super().__init__(message)
        self.requested = requested
        self.remaining = remaining


class PrivacyWarning(UserWarning):
    """A choice is legal but weakens privacy in practice (e.g. δ not far below 1/n)."""


class InsecureRandomnessWarning(PrivacyWarning):
    """A release charged to an accountant draws its noise from a non-secure generator.

    An int seed, a :class:`numpy.random.Generator` over PCG64 (or any generator dpkit did not key
    from the operating system) makes the noise predictable to whoever knows or guesses the seed, so
    the budget charged buys no privacy. Raised before any noise is drawn, from the ``rng=``
    argument alone (never from the data).

    Silence it where reproducible noise is the point (tests, simulations): pass
    ``rng=dpkit.random.seeded(seed)``, an explicit opt-in, or filter the warning, e.g.
    ``warnings.simplefilter("ignore", InsecureRandomnessWarning)`` or, for pytest,
    ``filterwarnings = ["ignore::dpkit.errors.InsecureRandomnessWarning"]``.
    """
