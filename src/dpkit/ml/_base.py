"""What every private estimator shares: parameter checks, data checks, clipping and charging.

The estimators follow scikit-learn's conventions: ``__init__`` stores keyword-only parameters and
checks nothing; ``fit`` checks everything (privacy parameters, declared bounds, then the data),
builds its mechanisms, charges their composed event to the accountant, and only then looks at
the data's values beyond their shape and finiteness (and, for a classifier, whether a label is a
declared class: records with other labels are dropped, which changes no outcome).

The rule every check here follows: whether ``fit`` succeeds, and which error it raises, depends
on the parameters and the shape of the data, never on a record's value. Values outside the
declared domain are clipped (bounds, norms) or dropped (labels); only values with no place in
any domain (NaN; None or text where a number is expected) are *missing*: the estimator's
``missing=`` parameter (:mod:`dpkit._missing`) refuses them before any charge (``"raise"``, the
default; the refusal reveals that one exists) or drops their records (``"drop"``). ±inf is a
value beyond the bounds and is clipped like any other.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._checks import check_delta, check_epsilon, check_positive
from dpkit._missing import (
    MISSING_DEFAULT,
    Missing,
    check_missing,
    handle_missing,
    missing_error,
    object_to_float,
)
from dpkit.accounting import ComposedEvent, Event, Neighbouring
from dpkit.accounting._charge import charge_release
from dpkit.accounting._relation import holding_under
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
    "fit_features",
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

    def _check_missing(self) -> Missing:
        return check_missing(getattr(self, "missing", MISSING_DEFAULT))

    def _fit_features(self, X: object) -> FloatArray:
        return fit_features(self, X, self._check_missing())

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
    """The declared classes: at least two distinct labels, all numbers or all strings.

    The label set is a public parameter: it is never read from the data (which labels occur is
    itself private), and this check looks at nothing else, so its errors reveal no record.
    """
    if value is None:
        raise PrivacyParameterError(
            "classes is required: list every label the model may see (e.g. classes=[0, 1]); "
            "reading them from the data would reveal rare labels."
        )
    shape_error = PrivacyParameterError(
        "classes must be a list of at least two distinct labels, all numbers or all strings."
    )
    try:
        if isinstance(value, str | bytes):
            raise TypeError
        items = list(value)  # type: ignore[call-overload]
    except TypeError:
        raise shape_error from None
    numeric = all(isinstance(c, numbers.Real) and not isinstance(c, str) for c in items)
    textual = all(isinstance(c, str) for c in items)
    if len(items) < 2 or not (numeric or textual):
        raise shape_error
    arr = np.asarray(items)
    if numeric and arr.dtype.kind not in "iub":  # mixed ints and floats, or huge ints
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)):
            raise PrivacyParameterError("classes must be finite numbers (or strings).")
    if np.unique(arr).size != arr.size:
        raise shape_error
    return np.sort(arr)


class _DataTypeError(DataError, TypeError):
    """Data of a type that cannot be read as numbers (a DataError that is also a TypeError,
    as NumPy and scikit-learn raise for such input)."""


def _nonfinite_kw() -> dict[str, Any]:
    """The keyword that lets scikit-learn's validation pass NaN and ±inf through, by the name
    the installed version knows (``ensure_all_finite`` since 1.6, ``force_all_finite`` before):
    a fit decides on them itself (NaN by ``missing=``, ±inf clipped), never by refusing."""
    import inspect

    from sklearn.utils.validation import check_array  # type: ignore[import-untyped]

    names = inspect.signature(check_array).parameters
    key = "ensure_all_finite" if "ensure_all_finite" in names else "force_all_finite"
    return {key: False}


def _validate(estimator: Any, X: object, y: object | None, *, reset: bool, finite: bool) -> Any:
    try:  # scikit-learn >= 1.6
        from sklearn.utils.validation import validate_data
    except ImportError:  # pragma: no cover - scikit-learn 1.5
        validate_data = None
    kwargs: dict[str, Any] = {"dtype": np.float64, "ensure_min_samples": 0}
    if not finite:
        kwargs.update(_nonfinite_kw())
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
    """A finite 2-d float array (``n_features_in_`` set when ``reset``); empty data allowed.

    For prediction and transformation (not a release): NaN and ±inf are refused there.
    """
    if X is None:
        raise DataError("X is None; pass a 2-d array of shape (n_samples, n_features).")
    out: FloatArray = _validate(estimator, X, None, reset=reset, finite=True)
    return out


def fit_features(estimator: Any, X: object, missing: Missing) -> FloatArray:
    """The training records as a 2-d float array, the missing-value policy applied.

    ±inf is kept: it is a value beyond the declared bounds (or norm), which the estimator clips
    like any far value. A row with a NaN is refused (``missing="raise"``, before any charge; the
    refusal reveals that one exists) or dropped (``missing="drop"``, a per-record filter, stable
    under add/remove neighbours).
    """
    if X is None:
        raise DataError("X is None; pass a 2-d array of shape (n_samples, n_features).")
    Xc: FloatArray = _validate(estimator, X, None, reset=True, finite=False)
    return handle_missing(Xc, missing, "X")


def check_xy(
    estimator: Any, X: object, y: object, missing: Missing, *, y_numeric: bool = False
) -> tuple[FloatArray, npt.NDArray[Any]]:
    """Training X (as :func:`fit_features`) and y, a 1-d array of the same length.

    A record is missing when its row of X holds a NaN or its target is missing: None or NaN, or
    (``y_numeric``, a regression target, returned as float64) anything that is not a number.
    """
    if X is None:
        raise DataError("X is required; pass a 2-d array of shape (n_samples, n_features).")
    if y is None:
        raise DataError(
            f"{type(estimator).__name__} requires y to be passed, but the target y is None."
        )
    y_arr = np.asarray(y)
    if y_arr.dtype.kind in "US" and not hasattr(y, "dtype"):
        # NumPy reads the list [0, 1, "a"] as the strings "0", "1", "a": one record would
        # change how every other label is read (and drop them all). Each label is kept as
        # given, so that it is matched to the declared classes on its own.
        y_arr = np.array(y, dtype=object)
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
    # X alone through scikit-learn's validation: its check of y would refuse a NaN or ±inf
    # target on its value; the policy below decides instead
    Xc: FloatArray = _validate(estimator, X, None, reset=True, finite=False)
    if Xc.shape[0] != y_arr.shape[0]:
        raise DataError(
            f"X and y have inconsistent numbers of samples: {Xc.shape[0]} and {y_arr.shape[0]}."
        )
    if y_numeric:
        if y_arr.dtype == object or y_arr.dtype.kind in "US":
            y_arr = object_to_float(np.asarray(y_arr, dtype=object))
        elif y_arr.dtype.kind not in "biuf":
            raise DataError("y must be numeric (a regression target).")
        y_arr = y_arr.astype(np.float64)
        y_missing = np.isnan(y_arr)
    elif y_arr.dtype.kind == "f":
        y_missing = np.isnan(y_arr)
    elif y_arr.dtype == object:
        y_missing = np.fromiter(
            (v is None or (isinstance(v, float) and math.isnan(v)) for v in y_arr.tolist()),
            dtype=np.bool_,
            count=y_arr.shape[0],
        )
    else:
        y_missing = np.zeros(y_arr.shape[0], dtype=np.bool_)
    bad = np.isnan(Xc).any(axis=1) | y_missing
    if bad.any():
        if missing == "raise":
            raise missing_error("X or y")
        Xc, y_arr = Xc[~bad], y_arr[~bad]
    return Xc, y_arr


def encode_labels(
    y: npt.NDArray[Any], classes: npt.NDArray[Any]
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.intp]]:
    """Which records have a declared label, and its index in ``classes`` (for those records).

    A label that is not a declared class (another value, a fraction, a string among numeric
    classes) has no place in the model's domain: its record is *dropped*, exactly as if it were
    absent. Under add/remove neighbours that is a stable step (each record is kept or dropped
    on its own value), so the mechanisms' sensitivities already cover it. Nothing is refused
    here: whether ``fit`` succeeds must not depend on a record's label (a refusal before any
    charge would tell whether some record has an undeclared label, for free).
    """
    n = y.shape[0]
    both_numeric = y.dtype.kind in "iufb" and classes.dtype.kind in "iufb"
    both_text = y.dtype.kind == "U" and classes.dtype.kind == "U"
    if n and (both_numeric or both_text):
        idx = np.clip(np.searchsorted(classes, y), 0, classes.size - 1)
        keep = np.asarray(classes[idx] == y, dtype=np.bool_)
    else:  # mixed kinds or objects: one dictionary look-up per record, never raising
        where = {c: i for i, c in enumerate(classes.tolist())}
        found = []
        for v in y.tolist():
            try:
                found.append(where.get(v, -1))
            except TypeError:  # an unhashable label is no declared class
                found.append(-1)
        idx = np.asarray(found, dtype=np.intp).reshape(n)
        keep = idx >= 0
    return keep, idx[keep].astype(np.intp)


def clip_rows(X: FloatArray, norm: float) -> FloatArray:
    """Scale each row down to ℓ2 norm at most ``norm`` (rows inside the ball are unchanged)."""
    if X.size == 0:
        return X.copy()
    # ±inf is a value beyond the norm like any far value: a row holding one is the limit of
    # rows whose infinite entries grow without bound, i.e. the direction of their signs (its
    # finite entries vanish), scaled to the sphere below. Any per-record map into the ball
    # keeps the sensitivity computed for records in the ball.
    inf = np.isinf(X)
    if inf.any():
        rows = np.asarray(inf.any(axis=1), dtype=np.bool_)[:, None]
        X = np.where(rows, np.where(inf, np.sign(X) * np.finfo(np.float64).max, 0.0), X)
    # Norms are taken of each row divided by its largest |entry|, so that a huge but finite
    # row (1e300) is scaled down to the sphere instead of overflowing to a norm of inf (and
    # then to zero): a value outside the domain is clipped, never refused or distorted.
    big = np.max(np.abs(X), axis=1)
    unit = X / np.where(big > 0, big, 1.0)[:, None]
    r = np.sqrt(np.einsum("ij,ij->i", unit, unit))  # in [1, √d] for a non-zero row
    outside = big > norm / np.where(r > 0, r, 1.0)  # ‖x‖ = big·r > norm, without overflow
    # the product can exceed the bound by an ulp; shrink by a relative 1e-12 to be safe
    scaled = unit * (norm / np.where(r > 0, r, 1.0) * (1 - 1e-12))[:, None]
    out: FloatArray = np.where(outside[:, None], scaled, X * (1 - 1e-12))
    return out


def compose_events(events: list[Event]) -> Event:
    """One event for a fit made of several releases (a single one is returned as it is)."""
    return events[0] if len(events) == 1 else ComposedEvent(events=tuple(events))


def charge_fit(estimator: Any, event: Event, delta: float, label: str) -> Event:
    """Charge ``event`` to the estimator's accountant (if any) before anything is released.

    Returns the event charged (``event`` declaring add/remove), for the fitted ``event_``.

    Through the accounting package's one charging helper, with the estimator's ``rng``: a fit
    with seeded noise charged to an accountant warns ``InsecureRandomnessWarning``.
    """
    acct = estimator.accountant
    if acct is not None and not hasattr(acct, "charge"):
        raise PrivacyParameterError(
            "accountant must be a dpkit.accounting.Accountant (or have charge(event, label=)), "
            f"got {type(acct).__name__}."
        )
    # Every estimator's sensitivities are add/remove-one-record ones (each states it in its
    # "Privacy guarantee"), so a fit declares that relation.
    event = holding_under(event, Neighbouring.ADD_REMOVE)
    charge_release(acct, event, label, delta=delta or None, rng=estimator.rng)
    return event


def check_int(value: object, name: str, *, minimum: int = 1) -> int:
    """A positive integer hyper-parameter."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise PrivacyParameterError(f"{name} must be an int, got {type(value).__name__}.")
    if int(value) < minimum:
        raise PrivacyParameterError(f"{name} must be at least {minimum}, got {value}.")
    return int(value)
