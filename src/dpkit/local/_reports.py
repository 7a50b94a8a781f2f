"""Reports: what clients send, as plain arrays tagged with the protocol that made them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError

__all__ = ["Reports"]


@dataclass(frozen=True, eq=False)
class Reports:
    """A batch of client reports and the tag of the protocol and parameters that produced them.

    Attributes
    ----------
    protocol : str
        The producing protocol's :attr:`tag` (its name and every public parameter, e.g.
        ``"OUE(k=1024, p=1/2, q=...)"``). An aggregator refuses reports with another tag, so
        reports from a different protocol or parameter set cannot be mixed in silently.
    values : numpy.ndarray
        One row (or entry) per report; the layout is documented by each protocol.

    Examples
    --------
    >>> from dpkit.local import GRR
    >>> r = GRR(epsilon=1.0, k=4).randomize([0, 1, 2, 3], rng=0)
    >>> len(r), r.protocol.startswith("GRR(k=4")
    (4, True)
    >>> Reports.from_dict(r.to_dict()).values.tolist() == r.values.tolist()
    True
    """

    protocol: str
    values: npt.NDArray[Any]

    def __len__(self) -> int:
        return int(self.values.shape[0])

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable form: ``{"protocol": tag, "values": nested lists}``."""
        return {"protocol": self.protocol, "values": self.values.tolist()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Reports:
        """Inverse of :meth:`to_dict` (values are checked again by the aggregator)."""
        if not isinstance(data, dict) or set(data) != {"protocol", "values"}:
            raise DataError("reports must be a dict with exactly the keys 'protocol' and 'values'.")
        if not isinstance(data["protocol"], str):
            raise DataError("reports['protocol'] must be the producing protocol's tag (a str).")
        try:
            values = np.asarray(data["values"])
        except ValueError:
            raise DataError("reports['values'] must be a rectangular array of integers.") from None
        return cls(data["protocol"], values)
