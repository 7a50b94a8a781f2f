"""SmartNoise SQL's YAML metadata, read into a :class:`~dpkit.sql.Catalog`.

What maps: ``collection → schema → table → columns``; a table's ``max_ids`` becomes
``max_rows_per_unit`` (SmartNoise bounds rows per unit in the whole table, L1), and
``max_rows`` (L∞) and ``max_groups`` (L0) take the same value, so a unit's total stays
``max_ids``; ``row_privacy`` maps as is; a column's ``type``
(``int``/``float``/``string``/``boolean``/``datetime``/``unknown``), ``private_id`` (the privacy
unit), ``lower``/``upper`` (bounds) and ``nullable`` map as is. Tables are named
``schema.table`` and also plain ``table`` where that is unambiguous.

What does not: ``sample_max_ids`` (dpkit bounds by a keyed hash, never the database's random
order), ``censor_dims`` (dpkit always selects private keys with a threshold, or uses public
keys), ``clamp_counts`` (counts are rounded without bias, never clamped), ``clamp_columns``
(dpkit always clamps), ``use_dpsu``, ``rows`` (a table's size is private), ``missing_value`` and
``sensitivity`` (dpkit computes sensitivities from the bounds); these are ignored.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from dpkit.errors import DataError
from dpkit.sql._catalog import TYPES, Catalog, Column, Table

__all__ = ["read_smartnoise_yaml", "smartnoise_catalog"]


def read_smartnoise_yaml(path: str | Path) -> Catalog:
    """A catalog from a SmartNoise SQL metadata file (YAML).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> text = '''
    ... PUMS:
    ...   PUMS:
    ...     PUMS:
    ...       max_ids: 1
    ...       pid: {type: int, private_id: true}
    ...       age: {type: int, lower: 0, upper: 100}
    ... '''
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = pathlib.Path(d) / "pums.yaml"
    ...     _ = p.write_text(text)
    ...     cat = read_smartnoise_yaml(p)
    >>> t = cat.table("PUMS.PUMS")
    >>> t.privacy_unit, t.max_rows_per_unit, t.column("age").bounds
    ('pid', 1, (0.0, 100.0))
    """
    try:
        yaml: Any = importlib.import_module("yaml")
    except ImportError as exc:  # pragma: no cover - pyyaml is in the sql extra
        raise ImportError("reading SmartNoise YAML needs PyYAML: pip install 'dpkit[sql]'") from exc
    try:
        spec = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read the SmartNoise metadata ({type(exc).__name__}).") from None
    return smartnoise_catalog(spec)


_TABLE_SETTINGS = {
    "max_ids",
    "row_privacy",
    "sample_max_ids",
    "censor_dims",
    "clamp_counts",
    "clamp_columns",
    "use_dpsu",
    "rows",
}


def smartnoise_catalog(spec: Any) -> Catalog:
    """A catalog from SmartNoise metadata already parsed (nested dicts)."""
    if not isinstance(spec, dict) or not spec:
        raise DataError("SmartNoise metadata must map a collection name to its schemas.")
    spec = {k: v for k, v in spec.items() if k != "engine"}
    tables: list[Table] = []
    plain: dict[str, int] = {}
    for schemas in spec.values():
        if not isinstance(schemas, dict):
            raise DataError("SmartNoise metadata: a collection maps schema names to tables.")
        for schema, tabs in schemas.items():
            if not isinstance(tabs, dict):
                raise DataError("SmartNoise metadata: a schema maps table names to columns.")
            for name, cols in tabs.items():
                t = _table(f"{schema}.{name}" if schema else str(name), cols)
                tables.append(t)
                plain[str(name).lower()] = plain.get(str(name).lower(), 0) + 1
    for t in list(tables):
        short = t.name.split(".")[-1]
        if "." in t.name and plain[short.lower()] == 1:
            tables.append(
                Table(
                    short,
                    t.columns,
                    t.privacy_unit,
                    t.row_privacy,
                    t.max_groups,
                    t.max_rows,
                    t.max_rows_per_unit,
                    t.public,
                )
            )
    return Catalog(tables)


def _table(name: str, spec: object) -> Table:
    if not isinstance(spec, dict):
        raise DataError(f"SmartNoise table {name!r}: expected a mapping of columns.")
    cols: list[Column] = []
    unit = None
    for key, value in spec.items():
        if key in _TABLE_SETTINGS:
            continue
        if not isinstance(value, dict):
            raise DataError(f"SmartNoise table {name!r}: column {key!r} must be a mapping.")
        kind = str(value.get("type", "unknown"))
        kind = kind if kind in TYPES else "unknown"
        lo, hi = value.get("lower"), value.get("upper")
        bounds = None if lo is None or hi is None else (float(lo), float(hi))
        cols.append(
            Column(str(key), kind, bounds=bounds, nullable=bool(value.get("nullable", True)))
        )
        if value.get("private_id"):
            if unit is not None:
                raise DataError(f"SmartNoise table {name!r}: one private_id column, please.")
            unit = str(key)
    row = bool(spec.get("row_privacy", False))
    # never guess the unit: row privacy protects one row, a weaker guarantee than the
    # data holder may have meant (a person's many rows), so neither case is assumed
    if row and unit is not None:
        raise DataError(
            f"SmartNoise table {name!r}: private_id and row_privacy: true exclude each other."
        )
    if not row and unit is None:
        raise DataError(
            f"SmartNoise table {name!r}: declare a private_id column, or row_privacy: true "
            "(each row its own unit)."
        )
    max_ids = spec.get("max_ids", 1)
    return Table(
        name,
        tuple(cols),
        privacy_unit=None if row else unit,
        row_privacy=row,
        max_groups=max_ids,
        max_rows=max_ids,
        max_rows_per_unit=max_ids,
    )
