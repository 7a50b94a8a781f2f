"""What a query will do and cost, shown before anything is released."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dpkit.accounting import Event
from dpkit.accounting._guarantees import shown
from dpkit.frame._accuracy import cell_accuracy, kept_from
from dpkit.frame._aggs import Aggregation
from dpkit.frame._calibrate import NoisePlan
from dpkit.mechanisms._tails import check_alpha

__all__ = ["Explanation", "FrameRelease"]


@dataclass(frozen=True)
class Explanation:
    """The plan of a grouped query: steps, bounds, sensitivities, noise scales and total cost.

    Built from public parameters only (and checked on an empty frame of the data's schema), so
    it may be shown to anyone before the budget is spent, with the accuracy each released cell
    will have (:meth:`accuracy`) and, under private key selection, the chance that a key is
    released at all (:meth:`keep_probability`).
    """

    steps: tuple[str, ...]
    plan: NoisePlan
    epsilon: float
    delta: float
    event: Event
    aggs: tuple[Aggregation, ...] = ()

    def accuracy(self, alpha: float = 0.05, *, expected_n: float | None = None) -> dict[str, float]:
        """Half-width of each output column's ``1 − alpha`` noise interval, per released key.

        The released ``{name}_lo``/``{name}_hi`` of counts, distinct units, sums and histogram
        bins are exactly the value ± this. A mean's interval depends on its noisy count: give
        ``expected_n`` (a public guess of the rows per group) to see it at that size. With
        ``expected_n``, variances and standard deviations get the smallest bound on
        ``|released − exact|`` that holds with probability ``1 − alpha`` for every group of that
        size (from the joint law of their three noises, worst case over the group's mean and
        mean square). A quantile ``{name}`` gets ``{name}_rank``: a rank error in
        rows, at the resolution of its tree's leaves (the exact ``q·n``-th row lies within that
        many rows of the released leaf); its error in value depends on how densely the rows
        fill the leaves (private). Public parameters only; charges nothing.
        """
        return cell_accuracy(self.plan, self.aggs, check_alpha(alpha), expected_n)

    def keep_probability(self, units: int, *, keys_per_unit: int = 1) -> float:
        """Probability that a key held by ``units`` privacy units is released: 1 for public
        keys, else that of the private key selection (each unit holding ``keys_per_unit``
        keys after bounding)."""
        if self.plan.selection is None:
            return 1.0
        return self.plan.selection.keep_probability(units, keys_per_unit=keys_per_unit)

    def __str__(self) -> str:
        lines = ["Plan:"]
        lines += [f"  {i + 1}. {s}" for i, s in enumerate(self.steps)]
        lines.append("Noise (per released key and coordinate):")
        for mn in self.plan.measures:
            kind = "discrete Laplace b" if mn.kind == "laplace" else "discrete Gaussian sigma"
            lines.append(
                f"  {mn.measure.describe()}: l1 sens {mn.l1 * mn.unit:.6g}, l2 sens "
                f"{mn.l2 * mn.unit:.6g}, {kind} = {mn.real_scale:.6g} (sd {mn.sd:.6g})"
            )
        cells = self.accuracy(0.05)
        # a mean's, variance's or standard deviation's interval depends on its group's size,
        # which is private: named, with how to see it at a public guess of that size
        sized = [a.alias for a in self.aggs if a.stat in ("mean", "var", "std")]
        if cells or sized:
            lines.append("Accuracy (95% of the noise within, per released key):")
            lines += [f"  {name}: +/- {h:.4g}" for name, h in cells.items()]
            lines += [
                f"  {name}: depends on the group's size; see accuracy(expected_n=...)"
                for name in sized
            ]
        if self.plan.selection is not None:
            sel = self.plan.selection
            # the count threshold spends no ε beyond the count's own, shown above
            paid = f"epsilon={sel.epsilon:.6g}"
            if sel.method == "count":
                paid = "no epsilon of its own"
            lines.append(f"Key selection: {sel.describe()} at {paid}, delta={sel.delta:.3g}")
            half, most = kept_from(self.plan, 0.5), kept_from(self.plan, 0.95)
            lines.append(
                f"  a key is released with probability {self.keep_probability(1):.3g} with 1 "
                f"unit, >= 50% from {half} units, >= 95% from {most} units"
            )
        # the cost as asked for, in user units: the event's ε sits a safe-side hair below it
        if self.plan.rho is not None:
            lines.append(f"Total cost: rho={shown(self.plan.rho, 'up')}")
        else:
            lines.append(
                f"Total cost: epsilon={shown(self.epsilon, 'up')}, delta={shown(self.delta, 'up')}"
            )
        return "\n".join(lines)


@dataclass(frozen=True)
class FrameRelease:
    """A released table and what paid for it.

    Attributes
    ----------
    frame : polars.DataFrame or pandas.DataFrame
        Polars, or pandas where the query was made from a pandas DataFrame. One row per
        released key: the key columns, then for each aggregation its estimate and
        ``{name}_lo``/``{name}_hi``, a (1 − alpha) interval for the noise of that cell.
    event : Event
        What was charged.
    explanation : Explanation
        The plan that was executed.
    """

    frame: Any
    event: Event
    explanation: Explanation

    def _cost(self) -> str:
        e = self.explanation
        delta = f", delta={shown(e.delta, 'up')}" if e.delta > 0 else ""
        return f"epsilon={shown(e.epsilon, 'up')}{delta}"

    def __repr__(self) -> str:
        cols = [str(c) for c in self.frame.columns]
        return f"FrameRelease(rows={len(self.frame)}, columns={cols}, {self._cost()})"

    def _repr_html_(self) -> str:
        """A notebook's view: the released table (with its intervals) and what it cost."""
        from dpkit._html import table

        head = table("FrameRelease", [("cost", self._cost())])
        body = getattr(self.frame, "_repr_html_", None)
        return head + (body() if body is not None else table(None, [(str(self.frame),)]))
