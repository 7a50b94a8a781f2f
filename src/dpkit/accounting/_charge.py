"""The one place where a release is charged to an accountant.

Every layer of dpkit (mechanisms, statistics, tables, densities and synthesizers, local
randomizers, models, the holdout) charges through :func:`charge_release`, so no release can be
charged without the check of its randomness: a release paid for from a privacy budget whose noise
comes from a seed warns :class:`~dpkit.errors.InsecureRandomnessWarning` (the seed's owner can
remove the noise). ``rng`` is a required argument, so a new entry point cannot forget it.
"""

from __future__ import annotations

from typing import Any, Protocol

from dpkit.accounting._accountant import Accountant
from dpkit.errors import PrivacyParameterError
from dpkit.random import warn_if_insecure

__all__ = ["SupportsCharge", "charge_release"]


class SupportsCharge(Protocol):
    """Anything with ``charge(event, label=...)`` that raises when the budget would be exceeded."""

    def charge(self, event: Any, *, label: str | None = None) -> Any: ...


def charge_release(
    accountant: SupportsCharge | None,
    event: object,
    label: str | None,
    *,
    rng: object,
    delta: float | None = None,
) -> None:
    """Charge ``event`` to ``accountant`` (if any) *before* anything is released.

    ``rng`` is the release's ``rng=`` argument (or the generator made from it). A charged release
    with non-secure noise raises :class:`~dpkit.errors.InsecureRandomnessWarning` here, before the
    charge and before any noise is drawn: the check looks only at ``rng``, never at data, and
    draws nothing (:func:`dpkit.random.warn_if_insecure`). An uncharged release
    (``accountant=None``) is not checked: nothing is paid for as if its noise were secret.

    The accountant raises :class:`~dpkit.errors.BudgetExceededError` when the charge would
    overspend; the exception propagates and the caller releases nothing. ``delta`` is the δ the
    release was calibrated for, passed on to a :class:`~dpkit.accounting.Accountant` so that an
    (ε, δ) budget pays exactly (ε, δ) for it.

    Examples
    --------
    >>> import warnings
    >>> from dpkit.accounting import Accountant, LaplaceEvent, PureDP
    >>> from dpkit.random import seeded
    >>> acct = Accountant(PureDP(epsilon=1.0))
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     charge_release(acct, LaplaceEvent(scale=4.0), "a sum", rng=7)         # warns
    ...     charge_release(acct, LaplaceEvent(scale=4.0), "a sum", rng=seeded(7))  # opted in
    ...     charge_release(acct, LaplaceEvent(scale=4.0), "a sum", rng=None)       # secure
    >>> [type(w.message).__name__ for w in seen], acct.spent.epsilon
    (['InsecureRandomnessWarning'], 0.75)
    """
    if accountant is None:
        return
    if not hasattr(accountant, "charge"):
        raise PrivacyParameterError(
            "accountant must have a charge(event, label=...) method (e.g. dpkit.accounting."
            f"Accountant), got {type(accountant).__name__}."
        )
    warn_if_insecure(rng, stacklevel=4)
    if delta and isinstance(accountant, Accountant):
        accountant.charge(event, label=label, delta=delta)  # type: ignore[arg-type]
    else:
        accountant.charge(event, label=label)
