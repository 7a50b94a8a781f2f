"""Private synthetic tables from noisy low-order marginals (MST- and AIM-style), under zCDP."""

from __future__ import annotations

import importlib
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._checks import check_delta, check_epsilon, check_positive
from dpkit._missing import MISSING_DEFAULT, Missing
from dpkit.accounting import Event, Neighbouring
from dpkit.accounting._costs import rho_for
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.mechanisms._base import SupportsCharge, charge
from dpkit.random import RNGLike, as_generator
from dpkit.release._domain import Domain
from dpkit.release._graphical import BayesNet
from dpkit.release._marginals import check_cells
from dpkit.release._spark_codes import encode_spark, is_spark
from dpkit.release._synth_fit import fit_model
from dpkit.release._synth_plan import METHODS, Plan, make_plan

__all__ = ["DEFAULT_MAX_CELLS", "Synthesizer", "SyntheticModel"]

DEFAULT_MAX_CELLS = 1_000_000
"""Largest marginal a fit may measure (64 MiB of working memory at 64 bytes a cell)."""

OUTPUTS = ("numpy", "pandas", "polars", "dict")


@dataclass(frozen=True)
class SyntheticModel:
    """A fitted private model of a table; sampling from it is free post-processing.

    Attributes
    ----------
    domain : Domain
        The public domain it was fitted on.
    network : BayesNet
        The fitted model: each column's conditional on its parents (cells).
    n_estimate : float
        The private estimate of the number of records (from the one-way marginals).
    measured : list of tuple of str
        The marginals that were measured.
    event : Event
        The privacy event that paid for the fit.
    """

    domain: Domain
    network: BayesNet = field(repr=False)
    n_estimate: float
    measured: tuple[tuple[str, ...], ...]
    event: Event = field(repr=False)

    def sample_codes(self, n: int, *, rng: RNGLike = None) -> npt.NDArray[np.int64]:
        """``n`` synthetic records as cell indices (records × columns)."""
        return self.network.sample(_rows(n), as_generator(rng))

    def sample(self, n: int | None = None, *, rng: RNGLike = None, output: str = "numpy") -> Any:
        """A synthetic table of ``n`` rows (default: the private estimate of n).

        Parameters
        ----------
        n : int, optional
            Rows; any number (sampling does not touch the data).
        rng : None, int or numpy.random.Generator
            Randomness of the sampling.
        output : {"numpy", "pandas", "polars", "dict"}
            ``"numpy"`` gives a structured array (float fields for numeric columns, object
            fields for categorical ones); the others a DataFrame or a dict of arrays.
        """
        if output not in OUTPUTS:
            raise DataError(f"output must be one of {OUTPUTS}, got {output!r}.")
        rows = round(self.n_estimate) if n is None else _rows(n)
        gen = as_generator(rng)
        codes = self.network.sample(rows, gen)
        cols = {
            k: c.decode(codes[:, i], gen) for i, (k, c) in enumerate(self.domain.columns.items())
        }
        return _as_output(cols, output)


def _rows(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or int(n) < 0:
        raise DataError(f"n must be a non-negative integer, got {n!r}.")
    return int(n)


def _as_output(cols: dict[str, npt.NDArray[Any]], output: str) -> Any:
    if output == "dict":
        return cols
    if output == "pandas":
        try:
            pd = importlib.import_module("pandas")
        except ImportError:  # pragma: no cover - pandas ships with the release extra
            hint = "output='pandas' needs pandas: pip install 'dpkit[release]'"
            raise ImportError(hint) from None
        return pd.DataFrame(cols)
    if output == "polars":
        try:
            pl = importlib.import_module("polars")
        except ImportError:  # pragma: no cover - depends on the environment
            raise ImportError("output='polars' needs polars: pip install 'dpkit[frame]'") from None
        return pl.DataFrame({k: v.tolist() if v.dtype == object else v for k, v in cols.items()})
    dtype = [(k, np.float64 if v.dtype != object else object) for k, v in cols.items()]
    n = len(next(iter(cols.values())))
    out = np.empty(n, dtype=dtype)
    for k, v in cols.items():
        out[k] = v
    return out


def _check_method(method: object) -> str:
    if method not in METHODS:
        raise PrivacyParameterError(f"method must be one of {METHODS}, got {method!r}.")
    return str(method)


class Synthesizer:
    """A private synthetic-data generator for mixed numeric/categorical tables.

    It measures low-order marginals of the encoded table (:class:`Domain` cells) with exact
    discrete Gaussian noise and fits a graphical model (a Bayesian network whose families have
    at most three columns) from which any number of synthetic rows can be drawn.

    * ``method="aim"`` (default): adaptive selection of marginals after McKenna et al. (PVLDB
      2022): each round the exponential mechanism picks a column and one or two parents by
      AIM's quality score, which trades the model's error against the measurement's noise.
    * ``method="mst"``: MST (McKenna, Miklau & Sheldon 2021): a maximum spanning tree of pair
      marginals, chosen privately edge by edge, then measured.
    * ``method="independent"``: one-way marginals only; the baseline.

    Parameters
    ----------
    domain : Domain
        Public domain of the table (never read from the data; see
        :func:`~dpkit.release.discover_domain` to estimate one privately).
    epsilon, delta : float, optional
        Target (ε, δ); the fit is ρ-zCDP with ρ the largest ρ whose conversion
        (Canonne, Kamath & Steinke 2020, Cor. 13) gives (ε, δ).
    rho : float, optional
        A zCDP budget instead of (ε, δ).
    method : {"aim", "mst", "independent"}
    neighbouring : Neighbouring
        Add/remove one record (default) or replace one (ℓ2 sensitivity √2, score sensitivity 2).
    max_cells : int
        Largest marginal the fit may measure. A column larger than this, or (MST) columns that
        cannot be joined into a tree by pairs within it, are refused before anything is
        charged, with the memory they would need; AIM only considers marginals within it.

    Notes
    -----
    Privacy guarantee. :attr:`event` is known at construction: d one-way measurements, and for
    MST/AIM d − 1 rounds of one exponential-mechanism selection (ε²/8-zCDP, Cesar & Rogers
    2021) and one marginal measurement (Δ²/(2σ²)-zCDP, Canonne, Kamath & Steinke 2020). The
    whole fit is ρ-zCDP by composition (Bun & Steinke 2016), hence (ε, δ)-DP; it is charged
    before any noise is drawn, and data are validated before the charge. The synthetic rows
    are post-processing (seed 000 §5.2: sampling from a private model is private).

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.release import Categorical, Domain, Numeric, Synthesizer
    >>> gen = np.random.default_rng(0)
    >>> x = gen.integers(0, 3, 5000)
    >>> data = {"a": x, "b": np.where(gen.random(5000) < 0.9, x, 0), "c": gen.random(5000)}
    >>> dom = Domain({"a": Categorical([0, 1, 2]), "b": Categorical([0, 1, 2]),
    ...               "c": Numeric(0, 1, bins=4)})
    >>> model = Synthesizer(dom, epsilon=1.0, delta=1e-6).fit(data, rng=1)
    >>> syn = model.sample(2000, rng=2, output="dict")
    >>> bool(np.mean(syn["a"] == syn["b"]) > 0.8)
    True
    """

    def __init__(
        self,
        domain: Domain,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        rho: float | None = None,
        method: str = "aim",
        neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
        max_cells: int = DEFAULT_MAX_CELLS,
    ) -> None:
        if not isinstance(domain, Domain):
            raise DataError(f"domain must be a dpkit.release.Domain, got {type(domain).__name__}.")
        if (rho is None) == (epsilon is None):
            raise PrivacyParameterError("give either epsilon and delta, or rho (not both).")
        self.delta: float | None = None
        if rho is not None:
            if delta is not None:
                raise PrivacyParameterError("delta goes with epsilon, not with rho.")
            self.rho: float = check_positive(rho, "rho")
        else:
            eps = check_epsilon(epsilon)
            if delta is None:
                raise PrivacyParameterError("epsilon needs a delta in (0, 1) (zCDP accounting).")
            self.delta = check_delta(delta, allow_zero=False)
            self.rho = rho_for(eps, self.delta)
        if neighbouring not in (Neighbouring.ADD_REMOVE, Neighbouring.REPLACE):
            raise PrivacyParameterError("neighbouring must be a dpkit.accounting.Neighbouring.")
        if (
            isinstance(max_cells, bool)
            or not isinstance(max_cells, numbers.Integral)
            or max_cells < 1
        ):
            raise PrivacyParameterError(f"max_cells must be a positive integer, got {max_cells!r}.")
        self.domain: Domain = domain
        self.method: str = _check_method(method)
        self.neighbouring: Neighbouring = neighbouring
        self.max_cells: int = int(max_cells)
        self._check_size()
        self.plan: Plan = make_plan(
            self.method,
            self.rho,
            len(domain.names),
            neighbouring is Neighbouring.REPLACE,
            self.max_cells,
        )

    def _check_size(self) -> None:
        shape = self.domain.shape
        for k, s in zip(self.domain.names, shape, strict=True):
            check_cells(s, self.max_cells, f"column {k!r}")
        if self.method == "mst" and len(shape) > 1:
            # The tree must connect every column through pairs of at most max_cells cells.
            comp = {0}
            while len(comp) < len(shape):
                links = [
                    shape[i] * shape[j] for i in comp for j in range(len(shape)) if j not in comp
                ]
                grow = [
                    j
                    for j in range(len(shape))
                    if j not in comp and any(shape[i] * shape[j] <= self.max_cells for i in comp)
                ]
                if not grow:
                    check_cells(min(links), self.max_cells, "a pair marginal the tree needs")
                comp.update(grow)

    @property
    def event(self) -> Event:
        """What a fit costs, known before any data are seen."""
        return self.plan.event

    def fit(
        self,
        data: object,
        *,
        accountant: SupportsCharge | None = None,
        rng: RNGLike = None,
        progress: Callable[[int, int], None] | None = None,
        missing: Missing = MISSING_DEFAULT,
    ) -> SyntheticModel:
        """Fit the private model: validate the data, charge the plan, then measure and fit.

        Parameters
        ----------
        data : DataFrame (pandas or Polars), mapping of columns, or 2-d array
            The private table. Numeric values are clamped to their bounds; a category outside
            a column's list goes to its ``other`` or, without one, the record is dropped
            (:class:`Categorical`: the sensitivities cover both relations). Neither is ever
            refused, so whether the fit succeeds does not depend on any record's value; ±inf is
            clamped like any far value. Only missing values (NaN, None, a non-number in a
            numeric column) follow ``missing=``. An empty table is valid and answered with
            noise.
        accountant : Accountant, optional
            Charged :attr:`event` before any noise is drawn.
        rng : None, int or numpy.random.Generator
            ``None`` (default) is secure.
        progress : callable, optional
            ``progress(done, total)`` after each step, for progress bars.
        missing : {"raise", "drop"}
            ``"raise"`` (default): a record with a missing value is refused before anything is
            charged; the refusal reveals that the table holds one. ``"drop"``: such records are
            removed before the fit, a per-record filter covered by the sensitivities under both
            relations, as for a category with no ``other``.
        """
        if is_spark(data):  # encoded where the data are; each marginal one Spark job
            spark_codes = encode_spark(self.domain, data, missing)
            try:
                return self._fit(spark_codes, accountant, rng, progress)
            finally:
                spark_codes.release()
        return self._fit(self.domain.encode(data, missing), accountant, rng, progress)

    def _fit(
        self,
        codes: Any,
        accountant: SupportsCharge | None,
        rng: RNGLike,
        progress: Callable[[int, int], None] | None,
    ) -> SyntheticModel:
        charge(accountant, self.event, f"synthesizer ({self.method})", delta=self.delta, rng=rng)
        gen = as_generator(rng)
        net, n_hat, measured = fit_model(codes, self.domain.shape, self.plan, gen, progress)
        names = self.domain.names
        return SyntheticModel(
            self.domain,
            net,
            n_hat,
            tuple(tuple(names[c] for c in cols) for cols in measured),
            self.event,
        )

    def __repr__(self) -> str:
        return (
            f"Synthesizer(method={self.method!r}, rho={self.rho:.4g}, "
            f"columns={len(self.domain.names)})"
        )
