"""A tour of dpkit on the examples of the seeds, with real output (``make demo``).

Sections: exact noise; a randomized-response survey (Kamath 2020); McSherry's (2016) chocolate
example (count, mean, std, correlation with error bars); medians by the exponential mechanism
(McSherry 2016); a budget that refuses to be overspent and tight DP-SGD accounting; the accuracy
planned before a charge and the interval after it; and a PNG plot of the CDF of DP error against
sampling error (McSherry 2016), in ``demo_output/``.
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Callable

import numpy as np

import dpkit.stats as st
from dpkit import plan
from dpkit.accounting import ZCDP, Accountant, ApproxDP, dpsgd_epsilon, gaussian_sigma
from dpkit.errors import BudgetExceededError, InsecureRandomnessWarning
from dpkit.mechanisms import Gaussian, RandomizedResponse
from dpkit.noise import discrete_gaussian, discrete_laplace, laplace, laplace_grid
from dpkit.random import seeded

SEED = 2024  # the demo is reproducible; real releases use rng=None (secure)

# Each layer above the statistics keeps its own demo section next to its code.
_LAYER_SECTIONS = (
    "dpkit.frame._demo",
    "dpkit.holdout._demo",
    "dpkit.local._demo",
    "dpkit.ml._demo",
    "dpkit.release._demo_density",
    "dpkit.release._demo_synth",
    "dpkit.server._demo",
    "dpkit.sql._demo",
    "dpkit.torch._demo",
)


def _section(module: str) -> Callable[[], None]:
    try:
        demo: Callable[[], None] = importlib.import_module(module).demo
    except ImportError as exc:
        if exc.name is not None or "dpkit[" not in str(exc):
            raise
        reason = str(exc)  # an optional layer whose extra is not installed: say so, go on
        return lambda: print(f"({module.split('.')[1]} demo skipped: {reason})")
    return demo


def _noise() -> None:
    print("== Exact noise (dpkit.noise) ==")
    print(
        "discrete Laplace, scale 2:  ", np.asarray(discrete_laplace(2, size=8, rng=SEED)).tolist()
    )
    print(
        "discrete Gaussian, sigma 3: ", np.asarray(discrete_gaussian(3, size=8, rng=SEED)).tolist()
    )
    g = laplace_grid(1.0)
    out = laplace(42.0, 1.0, grid=g, rng=SEED)
    print(f"float-safe Laplace of 42 (scale 1): {out!r} = {out / 2.0**g:.0f} x 2^{g}")


def _survey() -> None:
    print("\n== Randomized response survey (Kamath 2020) ==")
    rr = RandomizedResponse(gamma=0.25)
    truth = np.random.default_rng(SEED).random(10_000) < 0.3
    est = rr.estimate(rr.randomize(truth, rng=SEED))
    print(f"epsilon = {rr.epsilon:.4f}; true share 0.3000, estimate {est.value:.4f}")


def _chocolate(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    t = np.where(rng.random(n) < 0.4, -1.0, 1.0)  # A = -1, B = +1
    like = np.where(t < 0, rng.uniform(0, 1, n), rng.uniform(-1, 0, n))
    return t, like


def _chocolate_stats() -> None:
    print("\n== McSherry's (2016) chocolate example, 1,000 people, epsilon 0.1 each ==")
    t, like = _chocolate(1000, np.random.default_rng(SEED))
    # planned before the release, from public parameters (1,000 people is a public guess here)
    plans = {
        "count": st.accuracy("count", epsilon=0.1),
        "mean": st.accuracy("mean", bounds=(-1, 1), epsilon=0.1, expected_n=1000),
        "std": st.accuracy("std", bounds=(-1, 1), epsilon=0.1, expected_n=1000),
    }
    for name, rel, exact in (
        ("count", st.count(like, epsilon=0.1, rng=SEED), like.size),
        ("mean", st.mean(like, bounds=(-1, 1), epsilon=0.1, rng=SEED), like.mean()),
        ("std", st.std(like, bounds=(-1, 1), epsilon=0.1, rng=SEED), like.std()),
        (
            "corr",
            st.corr(t, like, bounds=((-1, 1), (-1, 1)), epsilon=0.1, rng=SEED),
            np.corrcoef(t, like)[0, 1],
        ),
    ):
        lo, hi = rel.ci(0.05)
        covered = "yes" if lo <= exact <= hi else "no"
        f = ".0f" if name == "count" else ".4f"  # a count is an integer, shown as one
        planned = f"+/- {plans[name]:{f}}" if name in plans else "none"
        print(
            f"{name:6s} planned {planned:>11s}  private {rel.value:10{f}}  "
            f"95% CI ({lo:{f}}, {hi:{f}})  exact {exact:{f}}  covered: {covered}"
        )
    print("(a 95% interval misses the exact value about one time in twenty, by design; the")
    print(" std's plan is a bound for any data, the correlation's error depends on the data)")


def _medians() -> None:
    print("\n== Medians by the exponential mechanism (McSherry 2016), epsilon 0.1 ==")
    x = np.random.default_rng(SEED).uniform(0.123, 0.124, 1000)
    rank = st.accuracy("median", bounds=(-1, 1), epsilon=0.1)
    print(f"planned: 95% of releases within {rank:.0f} records of the median's rank")
    m = st.median(x, bounds=(-1, 1), epsilon=0.1, rng=SEED)
    print(f"1,000 points in [0.123, 0.124]: private median {m.value:.6f}, exact {np.median(x):.6f}")
    m = st.median(np.full(1000, 0.4), bounds=(-1, 1), epsilon=0.1, rng=SEED)
    print(f"1,000 copies of 0.4:            private median {m.value:.6f}")


def _accounting() -> None:
    print("\n== Budgets and accounting (dpkit.accounting) ==")
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6))
    x = np.random.default_rng(SEED).uniform(0, 100, 10_000)
    st.mean(x, bounds=(0, 100), epsilon=0.5, accountant=acct, rng=seeded(SEED))
    st.median(x, bounds=(0, 100), epsilon=0.25, accountant=acct, rng=seeded(SEED))
    for entry in acct.ledger:
        print(entry)  # costs as short decimals; the safe-side margins stay in the arithmetic
    print(f"spent {acct.spent!r}, remaining {acct.remaining!r}")
    try:
        st.mean(x, bounds=(0, 100), epsilon=0.5, accountant=acct, rng=seeded(SEED))
    except BudgetExceededError as e:
        print(f"a third query asking for epsilon 0.5 is refused:\n  {e}")
    sigma = gaussian_sigma(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    print(f"analytic Gaussian sigma for (1, 1e-5): {sigma:.4f} (classic formula: 4.8448)")
    for method in ("pld", "rdp"):
        eps = dpsgd_epsilon(
            noise_multiplier=4.0, sample_rate=0.01, steps=10_000, delta=1e-5, method=method
        )
        print(f"DP-SGD q=0.01, sigma=4, 10,000 steps, delta=1e-5: epsilon {eps:.3f} by {method}")


def _planning() -> None:
    print("\n== Accuracy before privacy is spent (dpkit.plan) ==")
    x = np.random.default_rng(SEED).uniform(0, 100, 10_000)
    eps = plan.epsilon_for("mean", bounds=(0, 100), n=x.size, half_width=0.1)
    before = st.accuracy("mean", bounds=(0, 100), n=x.size, epsilon=eps)
    print(f"mean of 10,000 values in [0, 100] to within +/- 0.1 (95%): epsilon={eps:.4f}")
    print(f"planned before any charge: the noise is within +/- {before:.4f} with 95% chance")
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6))
    m = st.mean(x, bounds=(0, 100), n=x.size, epsilon=eps, accountant=acct, rng=seeded(SEED + 1))
    lo, hi = m.ci(0.05)
    covered = "yes" if lo <= x.mean() <= hi else "no (one time in twenty)"
    print(f"released after the charge: {m.value:.3f}, 95% CI ({lo:.3f}, {hi:.3f}); "
          f"exact {x.mean():.3f}, covered: {covered}")  # fmt: skip
    rho = plan.rho_for("gaussian", sensitivity=1.0, half_width=5.0)
    zacct = Accountant(ZCDP(rho=1.0))
    g = Gaussian(rho=rho, sensitivity=1.0)
    for _ in range(3):
        g.release(10.0, accountant=zacct, rng=seeded(SEED))
    spent = zacct.spent
    assert isinstance(spent, ZCDP)
    print(
        f"Gaussian to within +/- 5 needs rho={rho:.4f}; three releases spent "
        f"rho={spent.rho:.4f} of 1 (zCDP adds up with no conversion)"
    )


def _plot() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = np.random.default_rng(SEED)
    stds, private = [], []
    for i in range(300):
        # McSherry 2016: two thirds uniform on [0, 1], one third on [-1, 0]
        like = np.where(g.random(1000) < 2 / 3, g.uniform(0, 1, 1000), g.uniform(-1, 0, 1000))
        stds.append(like.std())
        private.append(st.std(like, bounds=(-1, 1), epsilon=0.1, rng=i).value - like.std())
    sampling = list(np.array(stds) - np.mean(stds))  # centred, as in the seed
    os.makedirs("demo_output", exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    for errs, label in ((sampling, "sampling error"), (private, "DP error (epsilon 0.1)")):
        s = np.sort(errs)
        ax.plot(s, np.arange(1, s.size + 1) / s.size, label=label)
    ax.set_xlabel("error of the standard deviation")
    ax.set_ylabel("cumulative fraction")
    ax.legend()
    fig.tight_layout()
    path = os.path.join("demo_output", "std_error_cdf.png")
    fig.savefig(path)
    plt.close(fig)
    print(f"\nCDF of DP error vs sampling error written to {path}")


def main() -> None:
    """Run every section of the tour.

    The tour is seeded so that its output can be compared run to run; seeded noise is not secret,
    so charged releases would warn (:class:`~dpkit.errors.InsecureRandomnessWarning`). The demo
    silences that one warning here, the documented way for simulations.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureRandomnessWarning)
        _noise()
        _survey()
        _chocolate_stats()
        _medians()
        _accounting()
        _planning()
        _plot()
        for module in _LAYER_SECTIONS:
            print()
            _section(module)()


if __name__ == "__main__":
    main()
