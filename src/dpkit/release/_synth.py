"""Private synthetic tables from noisy low-order marginals (MST- and AIM-style), under zCDP."""

from __future__ import annotations

import importlib
import itertools
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._checks import check_delta, check_epsilon, check_positive
from dpkit._missing import MISSING_DEFAULT, Missing
from dpkit.accounting import Event, Neighbouring
from dpkit.accounting._costs import rho_for
from dpkit.accounting._relation import holding_under
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.mechanisms._base import SupportsCharge, charge
from dpkit.mechanisms._tails import check_alpha, discrete_gaussian_quantile
from dpkit.noise import sampled_sigma
from dpkit.random import RNGLike, as_generator
from dpkit.release._domain import Domain
from dpkit.release._graphical import BayesNet
from dpkit.release._marginals import check_cells
from dpkit.release._scan_codes import is_scan, needed_marginals, scan_codes
from dpkit.release._spark_codes import encode_spark, is_spark
from dpkit.release._synth_aim import RoundRecord, fit_aim, fit_mst_pgm
from dpkit.release._synth_fit import fit_model
from dpkit.release._synth_plan import AIM_ALPHA, ESTIMATORS, METHODS, Plan, make_plan

__all__ = ["DEFAULT_MAX_CELLS", "DEFAULT_MAX_MODEL_CELLS", "Synthesizer", "SyntheticModel"]

DEFAULT_MAX_CELLS = 1_000_000
"""Largest marginal a fit may measure (64 MiB of working memory at 64 bytes a cell)."""

DEFAULT_MAX_MODEL_CELLS = 100_000
"""Largest junction tree (cells over its cliques) AIM's joint model may grow to: 0.8 MB of
potentials, which keeps a fit to seconds in NumPy; Private-PGM's AIM allows 80 MB."""

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
    rounds : tuple of (tuple of str, float, float)
        AIM with ``estimator="pgm"``: each round's measured marginal, its noise σ and its
        selection ε (the annealing schedule); empty otherwise.
    """

    domain: Domain
    network: BayesNet = field(repr=False)
    n_estimate: float
    measured: tuple[tuple[str, ...], ...]
    event: Event = field(repr=False)
    rounds: tuple[tuple[tuple[str, ...], float, float], ...] = ()
    fitted_on: str = field(default="numpy", repr=False)  # the output kind matching the input

    def sample_codes(self, n: int, *, rng: RNGLike = None) -> npt.NDArray[np.int64]:
        """``n`` synthetic records as cell indices (records × columns)."""
        return self.network.sample(_rows(n), as_generator(rng))

    def sample(
        self, n: int | None = None, *, rng: RNGLike = None, output: str | None = None
    ) -> Any:
        """A synthetic table of ``n`` rows (default: the private estimate of n).

        Parameters
        ----------
        n : int, optional
            Rows; any number (sampling does not touch the data).
        rng : None, int or numpy.random.Generator
            Randomness of the sampling.
        output : {"numpy", "pandas", "polars", "dict"}, optional
            ``"numpy"`` gives a structured array (float fields for numeric columns, int fields
            for integer ones, object fields for categorical ones); the others a DataFrame or a
            dict of arrays. Default: the kind the model was fitted on (a pandas DataFrame in,
            pandas out; Polars in, Polars out; anything else, NumPy). Every column keeps its
            declared type: an ``integer`` numeric column is int64.
        """
        if output is None:
            output = self.fitted_on
        if output not in OUTPUTS:
            raise DataError(f"output must be one of {OUTPUTS}, got {output!r}.")
        rows = round(self.n_estimate) if n is None else _rows(n)
        gen = as_generator(rng)
        codes = self.network.sample(rows, gen)
        cols = {
            k: _declared(c, c.decode(codes[:, i], gen))
            for i, (k, c) in enumerate(self.domain.columns.items())
        }
        return _as_output(cols, output)


def _declared(column: object, values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Values in their column's declared type: integers for an ``integer`` column (decoded as
    whole floats), as given otherwise."""
    if getattr(column, "integer", False):
        return values.astype(np.int64)
    return values


def _kind(data: object) -> str:
    """The output kind matching an input table: pandas, Polars, or NumPy for anything else."""
    top = type(data).__module__.split(".")[0]
    return top if top in ("pandas", "polars") else "numpy"


def _workload(domain: Domain, workload: object) -> list[tuple[int, ...]]:
    """Column indices of the workload's marginals; default: every 3-way marginal (every
    column together when there are fewer than three)."""
    names = list(domain.names)
    if workload is None:
        k = min(3, len(names))
        return list(itertools.combinations(range(len(names)), k))
    if isinstance(workload, (str, bytes)) or not isinstance(workload, Sequence) or not workload:
        raise DataError("workload must be a non-empty list of tuples of column names.")
    out: list[tuple[int, ...]] = []
    for s in workload:
        if isinstance(s, (str, bytes)) or not isinstance(s, Sequence) or not s:
            raise DataError("each workload entry must be a non-empty tuple of column names.")
        if any(c not in names for c in s) or len(set(s)) != len(s):
            raise DataError("a workload entry names an unknown or repeated column.")
        out.append(tuple(sorted(names.index(c) for c in s)))
    return out


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
    dtype = [(k, v.dtype if v.dtype.kind in "iO" else np.float64) for k, v in cols.items()]
    n = len(next(iter(cols.values())))
    out = np.empty(n, dtype=dtype)
    for k, v in cols.items():
        out[k] = v
    return out


def _check_method(method: object) -> str:
    if method not in METHODS:
        raise PrivacyParameterError(f"method must be one of {METHODS}, got {method!r}.")
    return str(method)


def _check_estimator(estimator: object) -> str:
    if estimator not in ESTIMATORS:
        raise PrivacyParameterError(f"estimator must be one of {ESTIMATORS}.")
    return str(estimator)


def _check_cells_param(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise PrivacyParameterError(f"{name} must be a positive integer.")
    return int(value)


class Synthesizer:
    """A private synthetic-data generator for mixed numeric/categorical tables.

    It measures low-order marginals of the encoded table (:class:`Domain` cells) with exact
    discrete Gaussian noise and fits one graphical model to all of them, from which any number
    of synthetic rows can be drawn.

    * ``method="aim"`` (default): AIM (McKenna, Mullins, Sheldon & Miklau, PVLDB 2022): every
      one-way marginal (measured again, from at most 30% of the budget, where its noisy cells
      are shallow for the noise), then rounds until the budget is spent; each round the exponential
      mechanism picks a marginal of the workload (or a subset of one) by the fitted model's
      current error on it, weighed against the noise its measurement would add, among those
      that keep the model within ``max_model_cells``; noise and selection budget anneal when a
      measurement stops changing the model.
    * ``method="mst"``: MST (McKenna, Miklau & Sheldon 2021): one-way marginals, a maximum
      spanning tree of pair marginals chosen privately edge by edge, then the tree's pairs.
    * ``method="independent"``: one-way marginals only; the baseline.

    ``estimator="pgm"`` (default) fits, after Private-PGM (McKenna, Sheldon & Miklau 2019), the
    Markov random field that best explains every noisy measurement at once (mirror descent with
    exact junction-tree inference), warm-started from the closed form. ``estimator="closed"``
    is the fast option: a Bayesian network whose conditionals are each read from one noisy
    marginal, with AIM restricted to d − 1 rounds that each add a column and at most two
    parents (a fit takes a fraction of a second, at some cost in accuracy).

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
    estimator : {"pgm", "closed"}
        Joint fit of every measurement (default), or the closed form (faster).
    max_model_cells : int
        AIM with ``estimator="pgm"``: the largest junction tree (cells summed over its cliques)
        the model may grow to; after a fraction f of ρ is spent, only f of it (AIM's schedule).
    workload : list of tuple of str, optional
        AIM: the marginals the table should preserve (default: every 3-way marginal). Its
        candidates are these and their subsets, each weighted by its overlap with the workload.

    Notes
    -----
    Privacy guarantee. :attr:`event` is known at construction: d one-way measurements, and for
    MST (and AIM with the closed form) d − 1 rounds of one exponential-mechanism selection
    (ε²/8-zCDP, Cesar & Rogers 2021) and one marginal measurement (Δ²/(2σ²)-zCDP, Canonne,
    Kamath & Steinke 2020). AIM with the joint fit chooses σ and ε round by round, so its event
    is the one-way measurements and ρ-zCDP for the rest; its rounds spend exactly that rest and
    never more (the last one takes what is left). The whole fit is ρ-zCDP by composition (Bun &
    Steinke 2016), hence (ε, δ)-DP; it is charged before any noise is drawn, and data are
    validated before the charge. The fitted model and the synthetic rows are post-processing of
    the noisy measurements (sampling from a private model is private).

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
        estimator: str = "pgm",
        max_model_cells: int = DEFAULT_MAX_MODEL_CELLS,
        workload: Sequence[Sequence[str]] | None = None,
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
        self.estimator: str = _check_estimator(estimator)
        self.neighbouring: Neighbouring = neighbouring
        self.max_cells: int = int(max_cells)
        self.max_model_cells: int = _check_cells_param(max_model_cells, "max_model_cells")
        self.workload: list[tuple[int, ...]] = _workload(domain, workload)
        self._check_size()
        self.plan: Plan = make_plan(
            self.method,
            self.rho,
            len(domain.names),
            neighbouring is Neighbouring.REPLACE,
            self.max_cells,
            self.estimator,
            self.max_model_cells,
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
        """What a fit costs, known before any data are seen.

        It declares the synthesizer's ``neighbouring``: the plan's sensitivities (√2 and 2
        under replacement) were computed for it, so an accountant refuses to compose a fit with
        releases under the other relation."""
        return holding_under(self.plan.event, self.neighbouring)

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
        data : DataFrame, mapping of columns, 2-d array, Parquet path or LazyFrame
            The private table (pandas, Polars or PySpark). A Parquet path (a file, directory
            or glob) or a Polars ``LazyFrame`` is streamed in batches, every marginal the fit
            needs counted in one pass: memory does not grow with the number of rows.
            Numeric values are clamped to their bounds; a category outside a column's list
            goes to its ``other`` or, without one, the record is dropped (:class:`Categorical`:
            the sensitivities cover both relations). Neither is ever refused, so whether the
            fit succeeds does not depend on any record's value; ±inf is clamped like any far
            value. Only missing values (NaN, None, a non-number in a numeric column) follow
            ``missing=``. An empty table is valid and answered with noise.
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
        if is_spark(data) or is_scan(data):
            # counted where the data are, every marginal the fit may read in one pass
            sets = needed_marginals(
                self.method, self.estimator, self.domain.shape, self.workload, self.max_cells
            )
            counted = (
                encode_spark(self.domain, data, missing, sets)
                if is_spark(data)
                else scan_codes(self.domain, data, missing, sets)
            )
            try:
                return self._fit(counted, accountant, rng, progress, _kind(data))
            finally:
                counted.release()
        codes = self.domain.encode(data, missing)
        return self._fit(codes, accountant, rng, progress, _kind(data))

    def _fit(
        self,
        codes: Any,
        accountant: SupportsCharge | None,
        rng: RNGLike,
        progress: Callable[[int, int], None] | None,
        fitted_on: str,
    ) -> SyntheticModel:
        charge(accountant, self.event, f"synthesizer ({self.method})", delta=self.delta, rng=rng)
        gen = as_generator(rng)
        shape = self.domain.shape
        rounds: list[RoundRecord] = []
        if self.estimator == "pgm" and self.method == "aim":
            pgm, n_hat, rounds = fit_aim(codes, shape, self.plan, self.workload, gen, progress)
            net = pgm.to_network()
            measured = [(c,) for c in range(len(shape))] + [r for r, _, _ in rounds]
        elif self.estimator == "pgm" and self.method == "mst":
            pgm, n_hat, measured = fit_mst_pgm(codes, shape, self.plan, gen, progress)
            net = pgm.to_network()
        else:
            net, n_hat, measured = fit_model(codes, shape, self.plan, gen, progress)
        names = self.domain.names
        return SyntheticModel(
            self.domain,
            net,
            n_hat,
            tuple(tuple(names[c] for c in cols) for cols in measured),
            self.event,
            tuple((tuple(names[c] for c in r), s, e) for r, s, e in rounds),
            fitted_on,
        )

    def accuracy(self, alpha: float = 0.05) -> dict[str, float]:
        """Half-width of the ``1 − alpha`` interval of each measured marginal cell's noisy count,
        from the plan alone (public parameters; charges nothing).

        Every cell of a measured marginal gets its own exact discrete Gaussian noise, so each
        noisy count is within this of the exact count with probability at least ``1 − alpha``
        (the exact tail of the discrete Gaussian, :func:`dpkit.mechanisms._tails`). Keys:
        ``"one-way"`` (each column's marginal) and, for MST and AIM, ``"rounds"`` (each later
        measurement). AIM with ``estimator="pgm"`` anneals its noise with the data: its rounds'
        σ is at most ``σ₀/√0.9`` (a last round that takes less than a full round's share is
        the widest), so ``"rounds"`` is a bound there, exact elsewhere. The synthetic rows are
        post-processing of these counts through a fitted model; their error also depends on
        the data and is measured by :func:`~dpkit.release.utility_report`.

        Examples
        --------
        >>> from dpkit.release import Categorical, Domain, Synthesizer
        >>> dom = Domain({"a": Categorical([0, 1]), "b": Categorical([0, 1])})
        >>> Synthesizer(dom, rho=0.5, method="mst", estimator="closed").accuracy()
        {'one-way': 5.0, 'rounds': 3.0}
        """
        a = check_alpha(alpha)
        pl = self.plan
        out = {"one-way": float(discrete_gaussian_quantile(pl.sigma_one_way, a))}
        if pl.rounds:
            # the last annealed round's σ: σ₀/√α from a share a hair below one round's ρ, then
            # rounded up to a σ the sampler draws
            widest = (
                sampled_sigma(pl.sigma_round / math.sqrt(AIM_ALPHA) * (1 + 1e-9))
                if pl.adaptive
                else pl.sigma_round
            )
            out["rounds"] = float(discrete_gaussian_quantile(widest, a))
        return out

    def __repr__(self) -> str:
        return (
            f"Synthesizer(method={self.method!r}, rho={self.rho:.4g}, "
            f"columns={len(self.domain.names)})"
        )
