"""Demo section: private models on data bundled with scikit-learn."""

from __future__ import annotations

import numpy as np

__all__ = ["demo"]

SEED = 2024


def demo() -> None:
    """Fit private models under one budget and compare them with non-private ones."""
    from sklearn import datasets  # type: ignore[import-untyped]
    from sklearn import linear_model as sk_linear
    from sklearn.model_selection import train_test_split  # type: ignore[import-untyped]
    from sklearn.naive_bayes import GaussianNB as PlainNB  # type: ignore[import-untyped]

    from dpkit.accounting import Accountant, ApproxDP
    from dpkit.errors import BudgetExceededError, PrivacyParameterError
    from dpkit.ml import GaussianNB, LogisticRegression
    from dpkit.random import seeded

    print("\n== Private models (dpkit.ml, scikit-learn conventions) ==")
    X, y = datasets.load_breast_cancer(return_X_y=True)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))  # domain ranges, taken as public here
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    budget = Accountant(ApproxDP(epsilon=3.0, delta=1e-6))
    plain = sk_linear.LogisticRegression(max_iter=1000).fit(Xtr, ytr).score(Xte, yte)
    print(f"breast cancer, {len(ytr)} training records; non-private logistic accuracy {plain:.3f}")
    for eps in (0.5, 1.0):
        clf = LogisticRegression(
            epsilon=eps, data_norm=float(np.sqrt(X.shape[1])), classes=[0, 1],
            accountant=budget, rng=seeded(SEED),
        )  # fmt: skip
        print(f"  logistic regression (objective perturbation), epsilon {eps}: "
              f"accuracy {clf.fit(Xtr, ytr).score(Xte, yte):.3f}")  # fmt: skip
    nb = GaussianNB(epsilon=1.0, bounds=(0, 1), classes=[0, 1], accountant=budget, rng=seeded(SEED))
    nb_plain = PlainNB().fit(Xtr, ytr).score(Xte, yte)
    print(f"  Gaussian naive Bayes, epsilon 1.0: accuracy {nb.fit(Xtr, ytr).score(Xte, yte):.3f} "
          f"(non-private {nb_plain:.3f})")  # fmt: skip
    spent = budget.spent
    assert isinstance(spent, ApproxDP)
    print(f"budget spent: epsilon {spent.epsilon:.2f} of 3.0")
    try:
        LogisticRegression(epsilon=1.0, data_norm=5.5, classes=[0, 1], accountant=budget).fit(
            Xtr, ytr
        )
    except BudgetExceededError:
        print("a fourth fit at epsilon 1.0 is refused: nothing was released")
    try:
        GaussianNB(epsilon=1.0, classes=[0, 1]).fit(Xtr, ytr)
    except PrivacyParameterError as exc:
        print(f"missing bounds are an error, never read from the data: {str(exc)[:58]}...")


if __name__ == "__main__":
    demo()
