"""Where a synthetic table came from, for its utility report: the method, the privacy spent
(ε, δ and ρ), the neighbouring relation, the public domain and the dpkit version — and no seed
(a seed would let anyone who reads the report regenerate the noise).

>>> from dpkit.release import Categorical, Domain, Numeric, Synthesizer
>>> dom = Domain({"a": Categorical(["x", "y"]), "b": Numeric(0, 10, bins=5, atoms=(0,))})
>>> p = provenance_of(Synthesizer(dom, epsilon=1.0, delta=1e-6, method="mst"))
>>> p.method, round(p.epsilon, 3), p.delta
('mst', 1.0, 1e-06)
>>> dict(p.domain)["b"]
'numeric [0, 10], 5 bins, atoms 0'
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from dpkit.release._domain import Categorical, Domain, Numeric

__all__ = ["Provenance", "provenance_of"]


@dataclass(frozen=True)
class Provenance:
    """The public facts of a synthetic release (see :func:`provenance_of`)."""

    method: str
    epsilon: float | None
    delta: float | None
    rho: float
    neighbouring: str
    domain: tuple[tuple[str, str], ...]
    dpkit_version: str
    created: str

    def lines(self) -> list[str]:
        """The provenance as text lines, for the report's summary and page."""
        if self.epsilon is not None and self.delta is not None:
            cost = f"(ε = {self.epsilon:.4g}, δ = {self.delta:.3g})-DP, ρ = {self.rho:.4g} zCDP"
        else:
            cost = f"ρ = {self.rho:.4g} zCDP"
        return [
            f"method {self.method}; {cost}; {self.neighbouring} neighbours",
            "domain: " + "; ".join(f"{n}: {d}" for n, d in self.domain),
            f"dpkit {self.dpkit_version}; report made {self.created}; no seed is recorded",
        ]


def _describe(col: Any) -> str:
    if isinstance(col, Numeric):
        kind = "integer" if col.integer else "numeric"
        text = f"{kind} [{col.lo:g}, {col.hi:g}], {col.bins} bins"
        if col.atoms:
            text += ", atoms " + ", ".join(f"{a:g}" for a in col.atoms)
        return text
    if isinstance(col, Categorical):
        other = "" if col.other is None else f", other → {col.other}"
        return "categories " + ", ".join(str(c) for c in col.categories) + other
    return type(col).__name__


def describe_domain(domain: Domain) -> tuple[tuple[str, str], ...]:
    """Each column of a (public) domain in words."""
    return tuple((name, _describe(col)) for name, col in domain.columns.items())


def provenance_of(synthesizer: Any) -> Provenance:
    """The provenance of tables sampled from a model fitted by ``synthesizer`` (a
    :class:`~dpkit.release.Synthesizer`): only its public parameters, never its randomness."""
    from dpkit._version import __version__
    from dpkit.accounting import zcdp_epsilon

    delta = getattr(synthesizer, "delta", None)
    rho = float(synthesizer.rho)
    epsilon = None if delta is None else float(zcdp_epsilon(rho, delta))
    return Provenance(
        method=str(synthesizer.method),
        epsilon=epsilon,
        delta=delta,
        rho=rho,
        neighbouring=str(synthesizer.neighbouring.value).replace("_", "/"),
        domain=describe_domain(synthesizer.domain),
        dpkit_version=__version__,
        created=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    )
