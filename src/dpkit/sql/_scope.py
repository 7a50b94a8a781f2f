"""FROM and JOIN: which tables a query reads, how their columns are named once joined.

One private table, optionally joined to public tables on equal columns (inner or left), and to
other private tables on the privacy unit only (as BigQuery allows: the joined rows of one unit
stay that unit's rows, and the contribution bounds apply after the join, so a join that
multiplies a unit's rows multiplies nothing but that unit's rows, which the bounds then cap).
Everything here reads the query text and the catalog only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from dpkit.errors import QueryRefusedError
from dpkit.sql._catalog import Catalog, Table
from dpkit.sql._exprs import Resolved
from dpkit.sql._parse import sqlglot

__all__ = ["Scope", "Source", "scope_of"]


@dataclass
class Source:
    """One table of the FROM clause and how it enters the joined table."""

    table: Table
    alias: str
    role: str  # "private" (the first), "unit_join" (private, on the unit), "public"
    names: dict[str, str] = field(default_factory=dict)  # lower column name → physical name
    on: list[tuple[str, str]] = field(default_factory=list)  # (left physical, own original)
    how: str = "inner"


@dataclass
class Scope:
    """The tables a query reads, in join order, and the resolver of column references."""

    sources: list[Source]
    unit: str | None  # physical name of the privacy unit column (None: row privacy)
    not_null: set[str] = field(default_factory=set)  # WHERE x IS NOT NULL: never NULL after it

    @property
    def private(self) -> Table:
        return self.sources[0].table

    def resolve(self, col: Any) -> Resolved:
        """A sqlglot Column to its physical name and metadata (refused if unknown/ambiguous)."""
        name = str(col.name).lower()
        qual = str(col.table).lower() if col.table else None
        hits: dict[str, Resolved] = {}
        for s in self.sources:
            if qual is not None and s.alias.lower() != qual:
                continue
            c = s.table.column(name)
            if c is None:
                continue
            phys = s.names[name]
            unit = (
                s.role != "public"
                and s.table.privacy_unit is not None
                and (s.table.privacy_unit.lower() == name)
            )
            values = c.keys
            if s.role == "public":
                values = None  # read from the public table when the plan is built
            if s.role == "public" and s.how == "left" and not c.nullable:
                c = replace(c, nullable=True)  # a private row without a match gets NULLs
            if phys in self.not_null and c.nullable:
                c = replace(c, nullable=False)
            hits.setdefault(phys, Resolved(phys, c, unit, values))
        if qual is not None and not any(s.alias.lower() == qual for s in self.sources):
            raise QueryRefusedError(
                "a column is qualified by a table or alias the query does not read."
            )
        if not hits:
            raise QueryRefusedError(
                "unknown column: a column the query names is not in its tables' metadata "
                "(names are case-insensitive; the catalog lists the columns)."
            )
        if len(hits) > 1:
            raise QueryRefusedError("a column name is ambiguous: qualify it with its table.")
        return next(iter(hits.values()))

    def public_column(self, physical: str) -> tuple[Source, str] | None:
        """The public source and original column that ``physical`` comes from, if any."""
        for s in self.sources:
            if s.role == "public":
                for low, phys in s.names.items():
                    if phys == physical and not any(a == phys for a, _ in s.on):
                        c = s.table.column(low)
                        assert c is not None
                        return s, c.name
        return None


def _table_of(node: Any, catalog: Catalog) -> tuple[Table, str]:
    exp = sqlglot().exp
    if isinstance(node, exp.Subquery) or not isinstance(node, exp.Table):
        raise QueryRefusedError(
            "subqueries are refused: a subquery over private data is released without noise "
            "to the outer query (one unit could move every row). Query the table directly."
        )
    if node.args.get("db") or node.args.get("catalog"):
        name = ".".join(p.name for p in node.parts)
    else:
        name = str(node.name)
    t = catalog.table(name)
    if t is None:
        raise QueryRefusedError("unknown table: a table the query reads is not in the catalog.")
    alias = str(node.alias) if node.alias else str(node.name)
    return t, alias


def _eq_pairs(on: Any) -> list[tuple[Any, Any]]:
    exp = sqlglot().exp
    if isinstance(on, exp.Paren):
        return _eq_pairs(on.this)
    if isinstance(on, exp.And):
        return _eq_pairs(on.this) + _eq_pairs(on.expression)
    if (
        isinstance(on, exp.EQ)
        and isinstance(on.this, exp.Column)
        and isinstance(on.expression, exp.Column)
    ):
        return [(on.this, on.expression)]
    raise QueryRefusedError(
        "a JOIN condition must be equalities between columns (a.x = b.y [AND ...]) or USING."
    )


def scope_of(tree: Any, catalog: Catalog) -> Scope:
    """Read FROM and JOINs; refuse what cannot be bounded."""
    exp = sqlglot().exp
    frm = tree.args.get("from_") or tree.args.get("from")
    if frm is None:
        raise QueryRefusedError("the query needs FROM a private table of the catalog.")
    first, alias = _table_of(frm.this, catalog)
    if first.public:
        raise QueryRefusedError(
            "the first table in FROM must be a private table, not a public one."
        )
    names = {c.name.lower(): c.name for c in first.columns}
    sources = [Source(first, alias, "private", names)]
    unit = None if first.privacy_unit is None else names[first.privacy_unit.lower()]
    taken = set(names.values())
    for join in tree.args.get("joins") or []:
        t, a = _table_of(join.this, catalog)
        kind = str(join.args.get("kind") or "").upper()
        side = str(join.args.get("side") or "").upper()
        if kind == "CROSS" or (join.args.get("on") is None and not join.args.get("using")):
            raise QueryRefusedError("cross joins are refused: give an ON or USING condition.")
        if side in ("RIGHT", "FULL") or kind in ("OUTER", "SEMI", "ANTI", "NATURAL"):
            raise QueryRefusedError(
                "only INNER and LEFT joins are supported (others create rows of no unit)."
            )
        how = "left" if side == "LEFT" else "inner"
        if any(s.alias.lower() == a.lower() for s in sources):
            raise QueryRefusedError("each table in FROM needs its own alias.")
        src = Source(t, a, "public" if t.public else "unit_join", how=how)
        scope = Scope(sources, unit)
        if join.args.get("using"):
            pairs = [
                (scope.resolve(exp.column(u.name)).physical, str(u.name).lower())
                for u in join.args["using"]
            ]
        else:
            pairs = []
            for left, right in _eq_pairs(join.args["on"]):
                mine = [c for c in (left, right) if c.table and str(c.table).lower() == a.lower()]
                if len(mine) != 1:
                    raise QueryRefusedError(
                        "qualify both sides of a JOIN condition with their table (a.x = b.y)."
                    )
                other = right if mine[0] is left else left
                pairs.append((scope.resolve(other).physical, str(mine[0].name).lower()))
        for _, own in pairs:
            if t.column(own) is None:
                raise QueryRefusedError(
                    "unknown column in a JOIN condition: not in its table's metadata."
                )
        if not t.public:
            if unit is None or t.privacy_unit is None:
                raise QueryRefusedError(
                    "private tables can be joined only on their privacy unit (both declared)."
                )
            if how != "inner" or sorted(pairs) != [(unit, t.privacy_unit.lower())]:
                raise QueryRefusedError(
                    "joins of private tables are refused except an inner join on the privacy "
                    "unit columns alone (a.unit = b.unit): any other join lets one unit's rows "
                    "multiply another unit's."
                )
        src.on = pairs
        for c in t.columns:
            low = c.name.lower()
            joined = [p for p, o in pairs if o == low]
            if joined:
                src.names[low] = joined[0]
                continue
            phys = c.name if c.name not in taken else f"{a}_{c.name}"
            if phys in taken:
                raise QueryRefusedError("column names collide after the join; alias the tables.")
            src.names[low] = phys
            taken.add(phys)
        sources.append(src)
    return Scope(sources, unit)
