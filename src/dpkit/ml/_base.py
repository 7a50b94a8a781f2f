"""What every private estimator shares: parameter checks, data checks, clipping and charging.

The estimators follow scikit-learn's conventions: ``__init__`` stores keyword-only parameters and
checks nothing; ``fit`` checks everything (privacy parameters, declared bounds, then the data),
builds its mechanisms, charges their composed event to the accountant, and only then looks at
the data's values beyond their shape and finiteness.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._checks import check_delta, check_epsilon, check_positive
from dpkit.accounting import ComposedEvent, Event
from dpkit.accounting._charge import charge_release
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.random import RNGLike, as_generator

__all__ = [
    "FloatArray",
    "PrivateEstimator",
    "charge_fit",
    "check_box",
    "check_classes",
    "check_features",
    "check_int",
    "check_interval",
    "check_norm",
    "check_privacy",
    "check_xy",
    "clip_rows",
    "compose_events",
    "encode_labels",
    "require_sklearn",
]

FloatArray = npt.NDArray[np.float64]

_INSTALL = "dpkit.ml needs scikit-learn; install it with: pip install 'dpkit[ml]'"


def require_sklearn() -> Any:
    """Import scikit-learn lazily, with an install hint when it is missing."""
    try:
        import sklearn  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ImportError(_INSTALL) from None
    return sklearn


require_sklearn()

from sklearn.base import BaseEstimator  # type: ignore[import-untyped]  # noqa: E402
from sklearn.base import clone as _sk_clone  # noqa: E402


class PrivateEstimator(BaseEstimator):  # type: ignore[misc]
    """Base class: scikit-learn plumbing shared by every private estimator.

    ``clone`` keeps the *same* accountant and generator (by reference) rather than deep copies,
    so that every fit made by ``cross_val_score`` or a grid search is charged to the budget the
    user gave and draws fresh noise.
    """

    def __sklearn_clone__(self) -> PrivateEstimator:
        params = self.get_params(deep=False)
        kept = {"accountant", "rng"}
        new = {k: (v if k in kept else _sk_clone(v, safe=False)) for k, v in params.items()}
        return type(self)(**new)

    def _more_tags(self) -> dict[str, Any]:  # scikit-learn < 1.6
        return {"non_deterministic": self.rng is None, "allow_nan": False}

    def __sklearn_tags__(self) -> Any:  # scikit-learn >= 1.6
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.rng is None
        tags.input_tags.allow_nan = False
        return tags

    def _generator(self) -> np.random.Generator:
        return as_generator(self.rng)

    def _check_features(self, X: object, *, reset: bool) -> FloatArray:
        return check_features(self, X, reset=reset)

    rng: RNGLike = None


def check_privacy(epsilon: object, delta: object, *, needs_delta: bool) -> tuple[float, float]:
    """ε (required, finite, > 0) and δ (required in (0, 1) when the method is approximate)."""
    if epsilon is None:
        raise PrivacyParameterError(
            "epsilon is required: pass epsilon=... (e.g. 1.0) to the estimator; dpkit never "
            "picks a privacy level for you."
        )
    eps = check_epsilon(epsilon)
    if not needs_delta:
        if delta not in (None, 0, 0.0):
            check_delta(delta)
        return eps, 0.0
    if delta is None:
        raise PrivacyParameterError(
            "delta is required for this (epsilon, delta) method: pass delta=... well below 1/n "
            "(e.g. 1e-6)."
        )
    return eps, check_delta(delta, allow_zero=False)


def check_norm(value: object, name: str) -> float:
    """A required positive finite bound on a norm (e.g. ``data_norm``)."""
    if value is None:
        raise PrivacyParameterError(
            f"{name} is required: give an upper bound on each record's norm from domain "
            "knowledge; dpkit never reads it from the data (that would leak)."
        )
    return check_positive(value, name)


def check_interval(value: object, name: str) -> tuple[float, float]:
    """A required ``(low, high)`` pair of finite numbers with low < high."""
    if value is None:
        raise PrivacyParameterError(
            f"{name} is required: give (low, high) from domain knowledge; dpkit never reads "
            "bounds from the data (that would leak)."
        )
    try:
        lo, hi = (float(v) for v in value)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise PrivacyParameterError(f"{name} must be a pair (low, high) of numbers.") from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
        raise PrivacyParameterError(f"{name} must be finite with low < high; they are reversed.")
    return lo, hi


def check_box(value: object, name: str, n_features: int) -> tuple[FloatArray, FloatArray]:
    """Per-feature bounds: ``(low, high)`` with scalars or arrays of length ``n_features``."""
    if value is None:
        raise PrivacyParameterError(
            f"{name} is required: give (low, high) per feature (scalars or arrays) from domain "
            "knowledge; dpkit never reads bounds from the data (that would leak)."
        )
    try:
        pair: tuple[Any, ...] = tuple(value)  # type: ignore[arg-type]
        lo_raw, hi_raw = pair
        lo = np.broadcast_to(np.asarray(lo_raw, dtype=np.float64), (n_features,)).copy()
        hi = np.broadcast_to(np.asarray(hi_raw, dtype=np.float64), (n_features,)).copy()
    except (TypeError, ValueError):
        raise PrivacyParameterError(
            f"{name} must be (low, high), each a number or an array of {n_features} numbers."
        ) from None
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))) or np.any(lo >= hi):
        raise PrivacyParameterError(f"{name} must be finite with low < high for every feature.")
    return lo, hi


def check_classes(value: object) -> npt.NDArray[Any]:
    """The declared classes: at least two distinct labels, given by the user."""
    if value is None:
        raise PrivacyParameterError(
            "classes is required: list every label the model may see (e.g. classes=[0, 1]); "
            "reading them from the data would reveal rare labels."
        )
    arr = np.asarray(value)
    if arr.ndim != 1 or arr.size < 2 or np.unique(arr).size != arr.size:
        raise PrivacyParameterError("classes must be a list of at least two distinct labels.")
    return np.sort(arr)


class _DataTypeError(DataError, TypeError):
    """Data of a type that cannot be read as numbers (a DataError that is also a TypeError,
    as NumPy and scikit-learn raise for such input)."""


def _validate(estimator: Any, X: object, y: object | None, *, reset: bool) -> Any:
    try:  # scikit-learn >= 1.6
        from sklearn.utils.validation import validate_data  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - scikit-learn 1.5
        validate_data = None
    kwargs: dict[str, Any] = {"dtype": np.float64, "ensure_min_samples": 0}
    try:
        if validate_data is not None:
            if y is None:
                return validate_data(estimator, X, reset=reset, **kwargs)
            return validate_data(estimator, X, y, reset=reset, y_numeric=False, **kwargs)
        if y is None:  # pragma: no cover - scikit-learn 1.5
            return estimator._validate_data(X, reset=reset, **kwargs)
        return estimator._validate_data(X, y, reset=reset, **kwargs)  # pragma: no cover
    except ValueError as exc:
        text = str(exc)
        if "could not convert" in text or "invalid literal" in text:
            text = "X must be numeric; it holds values that are not numbers."
        raise DataError(text) from None
    except TypeError as exc:
        text = str(exc)
        if "sparse" not in text.lower() and "argument must be" not in text:
            text = "X or y has an unsupported type; pass numeric arrays."
        raise _DataTypeError(text) from None


def check_features(estimator: Any, X: object, *, reset: bool) -> FloatArray:
    """A finite 2-d float array (``n_features_in_`` set when ``reset``); empty data allowed."""
    if X is None:
        raise DataError("X is None; pass a 2-d array of shape (n_samples, n_features).")
    out: FloatArray = _validate(estimator, X, None, reset=reset)
    return out


def check_xy(estimator: Any, X: object, y: object) -> tuple[FloatArray, npt.NDArray[Any]]:
    """X as :func:`check_features` and y a 1-d array of the same length, both finite."""
    if X is None:
        raise DataError("X is required; pass a 2-d array of shape (n_samples, n_features).")
    if y is None:
        raise DataError(
            f"{type(estimator).__name__} requires y to be passed, but the target y is None."
        )
    y_arr = np.asarray(y)
    if y_arr.ndim == 2 and y_arr.shape[1] == 1:
        from sklearn.exceptions import DataConversionWarning  # type: ignore[import-untyped]

        warnings.warn(
            "A column-vector y was passed when a 1d array was expected; it is raveled.",
            DataConversionWarning,
            stacklevel=3,
        )
        y_arr = y_arr.ravel()
    if y_arr.ndim != 1:
        raise DataError(f"y must be 1-d, got an array with {y_arr.ndim} dimensions.")
    Xc, yc = _validate(estimator, X, y_arr, reset=True)
    return Xc, yc


def encode_labels(y: npt.NDArray[Any], classes: npt.NDArray[Any]) -> npt.NDArray[np.intp]:
    """Indices of ``y`` in the declared classes; a label outside them is an error (no leak:
    the message does not say which)."""
    from sklearn.utils.multiclass import type_of_target  # type: ignore[import-untyped]

    if y.size and type_of_target(y) == "continuous":
        raise DataError(
            "Unknown label type: continuous. A classifier needs labels from its declared classes."
        )
    try:
        same_kind = y.dtype.kind == classes.dtype.kind or (
            y.dtype.kind in "iuf" and classes.dtype.kind in "iuf"
        )
        if not same_kind:
            raise TypeError
        idx = np.searchsorted(classes, y)
    except TypeError:
        raise DataError("y holds labels of another type than the declared classes.") from None
    idx = np.clip(idx, 0, classes.size - 1)
    if y.size and not np.all(classes[idx] == y):
        raise DataError(
            "y holds labels outside the declared classes; declare every label in classes=... "
            "(records are never silently dropped, and the label is not echoed)."
        )
    return idx.astype(np.intp)


def clip_rows(X: FloatArray, norm: float) -> FloatArray:
    """Scale each row down to ℓ2 norm at most ``norm`` (rows inside the ball are unchanged)."""
    if X.size == 0:
        return X.copy()
    lengths = np.sqrt(np.einsum("ij,ij->i", X, X))
    factor = np.minimum(1.0, norm / np.maximum(lengths, np.finfo(np.float64).tiny))
    # the product can exceed the bound by an ulp; shrink by a relative 1e-12 to be safe
    out: FloatArray = X * (factor * (1 - 1e-12))[:, None]
    return out


def compose_events(events: list[Event]) -> Event:
    """One event for a fit made of several releases (a single one is returned as it is)."""
    return events[0] if len(events) == 1 else ComposedEvent(events=tuple(events))


def charge_fit(estimator: Any, event: Event, delta: float, label: str) -> None:
    """Charge ``event`` to the estimator's accountant (if any) before anything is released.

    Through the accounting package's one charging helper, with the estimator's ``rng``: a fit
    with seeded noise charged to an accountant warns ``InsecureRandomnessWarning``.
    """
    acct = estimator.accountant
    if acct is not None and not hasattr(acct, "charge"):
        raise PrivacyParameterError(
            "accountant must be a dpkit.accounting.Accountant (or have charge(event, label=)), "
            f"got {type(acct).__name__}."
        )
    charge_release(acct, event, label, delta=delta or None, rng=estimator.rng)


def check_int(value: object, name: str, *, minimum: int = 1) -> int:
    """A positive integer hyper-parameter."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise PrivacyParameterError(f"{name} must be an int, got {type(value).__name__}.")
    if int(value) < minimum:
        raise PrivacyParameterError(f"{name} must be at least {minimum}, got {value}.")
    return int(value)
