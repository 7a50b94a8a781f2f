"""Choosing a frequency oracle from (ε, k) by variance and communication cost."""

from __future__ import annotations

from dpkit.errors import PrivacyParameterError
from dpkit.local._grr import GRR
from dpkit.local._hadamard import HadamardResponse
from dpkit.local._olh import OLH
from dpkit.local._oracle import FrequencyOracle
from dpkit.local._subset import SubsetSelection
from dpkit.local._unary import OUE, SUE

__all__ = ["PROTOCOLS", "candidates", "choose_protocol"]

PROTOCOLS: tuple[type[FrequencyOracle], ...] = (
    GRR,
    OUE,
    SUE,
    OLH,
    HadamardResponse,
    SubsetSelection,
)
"""Every frequency oracle :func:`choose_protocol` considers."""


def candidates(
    *, epsilon: float, k: int, protocols: tuple[type[FrequencyOracle], ...] = PROTOCOLS
) -> list[FrequencyOracle]:
    """Every protocol of ``protocols`` built for ``(ε, k)``."""
    if not protocols or not all(
        isinstance(c, type) and issubclass(c, FrequencyOracle) for c in protocols
    ):
        raise PrivacyParameterError(
            "protocols must be a non-empty tuple of FrequencyOracle classes."
        )
    return [cls(epsilon=epsilon, k=k) for cls in protocols]


def choose_protocol(
    *,
    epsilon: float,
    k: int,
    max_bits: int | None = None,
    tolerance: float = 1e-6,
    protocols: tuple[type[FrequencyOracle], ...] = PROTOCOLS,
) -> FrequencyOracle:
    """The frequency oracle with the lowest variance for ``(ε, k)``, within a message budget.

    Every candidate's exact variance for a rare value (``Var*``, Wang et al. 2017) is compared;
    among those within ``tolerance`` (relative) of the lowest, the one with the smallest report
    wins. With the defaults this reproduces Wang et al.'s rule — GRR while
    ``k < 3e^ε + 2``, a ``4e^ε/(e^ε − 1)²`` protocol beyond — with subset selection taking over
    where its exact variance is lower still.

    Parameters
    ----------
    epsilon : float
        ε per report.
    k : int
        Domain size.
    max_bits : int, optional
        Largest report a client may send, in bits (e.g. 64 rules out OUE for large ``k``).
    tolerance : float
        Relative variance slack traded for a smaller report. The default, one part in a
        million, only absorbs the rounding of each protocol's exact coins (so subset selection
        with ``d = 1``, which *is* GRR, does not beat GRR by rounding).
    protocols : tuple of classes
        The candidates (default :data:`PROTOCOLS`).

    Examples
    --------
    >>> from dpkit.local import choose_protocol
    >>> choose_protocol(epsilon=2.0, k=10).name
    'GRR'
    >>> choose_protocol(epsilon=1.0, k=1024).name  # subset selection, d = 275
    'SS'
    >>> choose_protocol(epsilon=1.0, k=1024, max_bits=128).name
    'OLH'
    """
    if (
        isinstance(tolerance, bool)
        or not isinstance(tolerance, int | float)
        or not 0.0 <= float(tolerance) < 1.0
    ):
        raise PrivacyParameterError(f"tolerance must be in [0, 1), got {tolerance!r}.")
    pool = candidates(epsilon=epsilon, k=k, protocols=protocols)
    if max_bits is not None:
        pool = [o for o in pool if o.message_bits <= max_bits]
        if not pool:
            raise PrivacyParameterError(
                f"no protocol sends at most max_bits={max_bits} bits; allow at least "
                f"{min(o.message_bits for o in candidates(epsilon=epsilon, k=k))}."
            )
    var = {id(o): float(o.variance(1)) for o in pool}
    best = min(var.values())
    near = [o for o in pool if var[id(o)] <= best * (1.0 + float(tolerance))]
    # ties in size go to the earlier (simpler) protocol of the list
    return min(near, key=lambda o: (o.message_bits, pool.index(o)))
