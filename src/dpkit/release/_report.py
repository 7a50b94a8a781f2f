"""How close a synthetic table is to the real one: the numbers and plots people use.

* per column: the Kolmogorov–Smirnov distance on numeric columns (sdmetrics' KSComplement is
  1 − KS) and the total variation distance (TVD) of the column's cells (TVComplement is 1 − TVD);
* the mean TVD over all 2-way and all 3-way marginals of the domain's cells — the workload
  error of MST and AIM (McKenna et al., PVLDB 2022, §2: mean ℓ1 = 2 × TVD), and the NIST
  k-marginal score 500 × (2 − mean ℓ1);
* train-on-synthetic, test-on-real: a classifier of one column fitted on the synthetic table and
  scored on real records it never saw, against the same classifier fitted on real records;
* plots of real against synthetic marginals, in an HTML page;
* given the synthesizer, the release's provenance: method, ε, δ (and ρ), neighbours, the public
  domain and the dpkit version, never a seed.

A report compares the synthetic table with the *real* one, so it is not private: it is for the
data holder deciding whether to release, not for publication.
"""

from __future__ import annotations

import base64
import html
import importlib
import io
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError
from dpkit.release._domain import Categorical, Domain, Numeric, table_columns
from dpkit.release._marginals import marginal, tvd
from dpkit.release._provenance import Provenance, provenance_of

__all__ = ["ColumnUtility", "TrainTestScore", "UtilityReport", "utility_report"]

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ColumnUtility:
    """KS distance (numeric columns; None for categorical) and TVD of the column's cells."""

    name: str
    ks: float | None
    tvd: float


@dataclass(frozen=True)
class TrainTestScore:
    """Accuracy on held-out real records of a classifier of ``target``.

    ``synthetic``: trained on the synthetic table; ``real``: trained on the real training
    split (the ceiling); ``majority``: always the most frequent real training class (the floor).
    """

    target: str
    synthetic: float
    real: float
    majority: float


@dataclass(frozen=True)
class UtilityReport:
    """Utility of a synthetic table against the real one (see :func:`utility_report`)."""

    columns: tuple[ColumnUtility, ...]
    tvd_2way: float
    tvd_3way: float
    train_test: TrainTestScore | None
    real_rows: int
    synthetic_rows: int
    plots: tuple[tuple[str, bytes], ...] = ()
    provenance: Provenance | None = None

    @property
    def kmarginal_score(self) -> float:
        """NIST's 3-marginal score 500 × (2 − mean ℓ1) = 1000 × (1 − mean 3-way TVD)."""
        return 1000.0 * (1.0 - self.tvd_3way)

    def summary(self) -> str:
        """A plain-text table of the report."""
        lines = [] if self.provenance is None else self.provenance.lines()
        lines.append(f"{'column':<18} {'KS':>7} {'TVD':>7}")
        for c in self.columns:
            ks = "" if c.ks is None else f"{c.ks:.3f}"
            lines.append(f"{c.name:<18} {ks:>7} {c.tvd:7.3f}")
        lines.append(f"mean 2-way TVD {self.tvd_2way:.3f}; mean 3-way TVD {self.tvd_3way:.3f}")
        if self.train_test is not None:
            t = self.train_test
            lines.append(
                f"predicting {t.target!r}: train on synthetic {t.synthetic:.3f}, on real "
                f"{t.real:.3f}, majority class {t.majority:.3f} (accuracy on held-out real)"
            )
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """A notebook's view: the per-column table and the marginal and classifier scores."""
        from dpkit._html import table

        cols = [
            (c.name, "" if c.ks is None else f"{c.ks:.3f}", f"{c.tvd:.3f}") for c in self.columns
        ]
        scores = [
            ("rows", f"{self.real_rows} real, {self.synthetic_rows} synthetic"),
            ("mean 2-way TVD", f"{self.tvd_2way:.4f}"),
            ("mean 3-way TVD", f"{self.tvd_3way:.4f}"),
        ]
        if self.train_test is not None:
            t = self.train_test
            scores.append(
                (
                    f"predicting {t.target}",
                    f"synthetic {t.synthetic:.3f}, real {t.real:.3f}, majority {t.majority:.3f}",
                )
            )
        return table("Utility report (compares with the real data: not private)", scores) + (
            table(None, cols, header=("column", "KS", "TVD"))
        )

    def to_html(self, path: str | Path, *, title: str = "Synthetic data utility") -> Path:
        """Write the report (tables and plots, images inline) to ``path``; returns the path."""
        rows = "".join(
            f"<tr><td>{html.escape(c.name)}</td><td>{'' if c.ks is None else f'{c.ks:.3f}'}"
            f"</td><td>{c.tvd:.3f}</td></tr>"
            for c in self.columns
        )
        tt = ""
        if self.train_test is not None:
            t = self.train_test
            tt = (
                f"<h2>Train on synthetic, test on real</h2><p>Predicting "
                f"<code>{html.escape(t.target)}</code>: accuracy {t.synthetic:.3f} when "
                f"trained on the synthetic table, {t.real:.3f} when trained on real records, "
                f"{t.majority:.3f} for the majority class.</p>"
            )
        prov = ""
        if self.provenance is not None:
            items = "".join(f"<li>{html.escape(t)}</li>" for t in self.provenance.lines())
            prov = f"<h2>Provenance</h2><ul>{items}</ul>"
        imgs = "".join(
            f"<h2>{html.escape(name)}</h2><img alt='{html.escape(name)}' "
            f"src='data:image/png;base64,{base64.b64encode(png).decode()}'/>"
            for name, png in self.plots
        )
        page = (
            f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            "</title><style>body{font-family:sans-serif;max-width:70em;margin:auto}"
            "td,th{padding:0 1em;text-align:right}img{max-width:100%}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p>{self.real_rows} real rows, "
            f"{self.synthetic_rows} synthetic rows. This report compares with the real data "
            "and is not itself private.</p>"
            f"{prov}<h2>Marginals</h2><p>Mean TVD over all 2-way marginals {self.tvd_2way:.4f}, "
            f"over all 3-way marginals {self.tvd_3way:.4f} (3-marginal score "
            f"{self.kmarginal_score:.0f} of 1000).</p>"
            f"<table><tr><th>column</th><th>KS</th><th>TVD</th></tr>{rows}</table>"
            f"{tt}{imgs}</body></html>"
        )
        out = Path(path)
        out.write_text(page, encoding="utf-8")
        return out


def _ks(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> float:
    """Two-sample Kolmogorov–Smirnov distance sup |F_a − F_b| (0 if either is empty)."""
    if a.size == 0 or b.size == 0:
        return 0.0
    a, b = np.sort(a), np.sort(b)
    grid = np.concatenate([a, b])
    fa = np.searchsorted(a, grid, side="right") / a.size
    fb = np.searchsorted(b, grid, side="right") / b.size
    return float(np.abs(fa - fb).max())


def mean_marginal_tvd(
    real: IntArray, synthetic: IntArray, shape: tuple[int, ...], k: int
) -> float:  # fmt: skip
    """Mean TVD over all k-way marginals of two encoded tables (NaN when fewer than k columns)."""
    sets = list(itertools.combinations(range(len(shape)), k))
    if not sets:
        return math.nan
    return float(
        np.mean([tvd(marginal(real, shape, c), marginal(synthetic, shape, c)) for c in sets])
    )


def _train_test(
    real: IntArray, synthetic: IntArray, shape: tuple[int, ...], target: int, name: str, seed: int
) -> TrainTestScore:
    try:
        lm = importlib.import_module("sklearn.linear_model")
    except ImportError:  # pragma: no cover - scikit-learn ships with the release extra
        hint = "train-on-synthetic needs scikit-learn: pip install 'dpkit[release]'"
        raise ImportError(hint) from None
    gen = np.random.default_rng(seed)
    idx = gen.permutation(real.shape[0])
    cut = int(0.7 * idx.size)
    train, test = real[idx[:cut]], real[idx[cut:]]
    feats = [c for c in range(len(shape)) if c != target]
    if test.shape[0] == 0 or train.shape[0] == 0:
        raise DataError("train-on-synthetic needs at least two real records.")

    def fit_score(tab: IntArray) -> float:
        y = tab[:, target]
        if tab.shape[0] == 0:
            return math.nan
        if np.unique(y).size < 2:
            return float(np.mean(test[:, target] == y[0]))
        clf = lm.LogisticRegression(max_iter=2000)
        # One BLAS thread: on a busy machine a thread pool makes this small fit 100× slower.
        with importlib.import_module("threadpoolctl").threadpool_limits(1):
            clf.fit(_one_hot(tab, feats, shape), y)
            pred = clf.predict(_one_hot(test, feats, shape))
        return float(np.mean(pred == test[:, target]))

    majority = int(np.bincount(train[:, target], minlength=shape[target]).argmax())
    return TrainTestScore(
        name, fit_score(synthetic), fit_score(train), float(np.mean(test[:, target] == majority))
    )


def _one_hot(tab: IntArray, feats: list[int], shape: tuple[int, ...]) -> npt.NDArray[np.float64]:
    """Indicator features of the cells of ``feats`` (a linear model then fits any per-cell
    effect of each column, numeric or categorical)."""
    offsets = np.concatenate([[0], np.cumsum([shape[c] for c in feats])])
    out = np.zeros((tab.shape[0], int(offsets[-1])), dtype=np.float64)
    rows = np.arange(tab.shape[0])
    for j, c in enumerate(feats):
        out[rows, offsets[j] + tab[:, c]] = 1.0
    return out


def _plots(domain: Domain, real: IntArray, synthetic: IntArray) -> tuple[tuple[str, bytes], ...]:
    try:
        mpl = importlib.import_module("matplotlib")
    except ImportError:  # pragma: no cover - matplotlib ships with the release extra
        return ()
    mpl.use("Agg")
    plt = importlib.import_module("matplotlib.pyplot")
    d = len(domain.names)
    ncol = min(3, d)
    nrow = math.ceil(d / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 2.8 * nrow), squeeze=False)
    for i, (name, col) in enumerate(domain.columns.items()):
        ax = axes[i // ncol][i % ncol]
        cells = col.cells
        r = np.bincount(real[:, i], minlength=cells) / max(1, real.shape[0])
        s = np.bincount(synthetic[:, i], minlength=cells) / max(1, synthetic.shape[0])
        x = np.arange(cells)
        ax.bar(x - 0.2, r, width=0.4, label="real")
        ax.bar(x + 0.2, s, width=0.4, label="synthetic")
        ax.set_title(name, fontsize=9)
        ax.set_xticks(x, _labels(col), fontsize=6, rotation=90)
    for j in range(d, nrow * ncol):
        axes[j // ncol][j % ncol].axis("off")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return (("Real and synthetic one-way marginals", buf.getvalue()),)


def _labels(col: Numeric | Categorical) -> list[str]:
    if isinstance(col, Categorical):
        return [str(c) for c in col.categories]
    e = col.bin_edges
    bins = [f"{e[j]:.3g}–{e[j + 1]:.3g}" for j in range(col.bins)]
    return [f"={a:g}" for a in col.atoms] + bins


def utility_report(
    real: object,
    synthetic: object,
    domain: Domain,
    *,
    target: str | None = None,
    plots: bool = True,
    seed: int = 0,
    synthesizer: Any = None,
) -> UtilityReport:
    """Compare a synthetic table with the real one.

    Parameters
    ----------
    real, synthetic : DataFrame, mapping or array
        Tables with the domain's columns.
    domain : Domain
        Cells for the TVDs (numeric columns binned, atoms kept).
    target : str, optional
        Column to predict (its cells) for train-on-synthetic, test-on-real: a logistic
        regression on indicators of the other columns' cells, 70/30 split of the real records.
    plots : bool
        Draw the marginal plots for :meth:`UtilityReport.to_html`.
    seed : int
        Seed of the split and the classifier (the report is not a release).
    synthesizer : Synthesizer, optional
        The synthesizer that fitted the model the table was sampled from: the report then
        records the release's provenance (method, ε, δ, domain, dpkit version; no seed).

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.release import Categorical, Domain, utility_report
    >>> dom = Domain({"a": Categorical([0, 1]), "b": Categorical([0, 1])})
    >>> real = {"a": np.array([0, 0, 1, 1]), "b": np.array([0, 0, 1, 1])}
    >>> fake = {"a": np.array([0, 1, 0, 1]), "b": np.array([0, 0, 1, 1])}
    >>> r = utility_report(real, fake, dom, plots=False)
    >>> r.columns[0].tvd, r.tvd_2way
    (0.0, 0.5)
    """
    if not isinstance(domain, Domain):
        raise DataError("domain must be a dpkit.release.Domain.")
    if target is not None and target not in domain.names:
        raise DataError(f"target {target!r} is not a column of the domain.")
    r = domain.encode(real)
    s = domain.encode(synthetic)
    shape = domain.shape
    raw_r = table_columns(real, domain.names)
    raw_s = table_columns(synthetic, domain.names)
    cols = []
    for i, (name, col) in enumerate(domain.columns.items()):
        ks = None
        if isinstance(col, Numeric):
            ks = _ks(
                np.clip(np.asarray(raw_r[name], dtype=np.float64), col.lo, col.hi),
                np.clip(np.asarray(raw_s[name], dtype=np.float64), col.lo, col.hi),
            )
        cols.append(
            ColumnUtility(name, ks, tvd(marginal(r, shape, (i,)), marginal(s, shape, (i,))))
        )
    tt = None
    if target is not None:
        tt = _train_test(r, s, shape, domain.names.index(target), target, seed)
    return UtilityReport(
        tuple(cols),
        mean_marginal_tvd(r, s, shape, 2),
        mean_marginal_tvd(r, s, shape, 3),
        tt,
        int(r.shape[0]),
        int(s.shape[0]),
        _plots(domain, r, s) if plots else (),
        None if synthesizer is None else provenance_of(synthesizer),
    )
