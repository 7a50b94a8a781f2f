"""dpkit.client.Curator against a real service: the library's shape, free dry runs and dummy
queries, idempotent retries, refusals as the library's exceptions, accuracy within the bars.

A dry run also says when the analyst's remaining budget would refuse the query, naming the
resource that runs out (ε, δ or ρ), what is left and the price; nothing is charged, and the real
request is then refused with the same resource named."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import dpkit.stats as st
from dpkit.client import AuthenticationError, Curator, NotFoundError, PermissionDeniedError, Quote
from dpkit.errors import BudgetExceededError, DataError, PrivacyParameterError
from dpkit.server import DatasetSchema
from dpkit.server._ingest import read_source


@pytest.fixture(scope="module")
def truth(server: Any, survey_spec: dict[str, Any]) -> Any:
    """The cleaned data, read the way the service reads them, for accuracy checks."""
    return read_source(
        server.root / "imports" / "survey.csv", DatasetSchema.from_dict(survey_spec)
    ).columns


@pytest.fixture(scope="module")
def client(server: Any) -> Any:
    _, key = server.analyst("carol", 20.0, 1e-6)
    with Curator(server.url, key) as c:
        yield c


def _spent(c: Curator) -> float:
    return float(c.budget()[0]["spent_epsilon"])


def test_mirrors_the_library(client: Curator, truth: Any) -> None:
    m = client.mean("survey", "age", epsilon=1.0)
    lo, hi = m.ci()
    assert lo < m.value < hi and m.epsilon == 1.0 and m.statistic == "mean"
    # The exact mean of the cleaned data lies within a few interval widths (n = 2000, ε = 1:
    # the noise sd is about 0.05; 3 widths of the 95% interval is far beyond 5 sd).
    assert abs(m.value - truth["age"].mean()) < 3 * (hi - lo)
    assert float(m) == m.value
    n = client.count("survey", epsilon=1.0)
    assert abs(n.value - 2000) < 20  # discrete Laplace scale 1: |noise| > 20 has p ≈ 4e-9
    h = client.histogram("survey", "sex", epsilon=1.0)
    assert h.labels == ("f", "m", "(other)") and np.asarray(h).shape == (3,)
    exact = np.bincount(truth["sex"], minlength=3)
    assert np.all(np.abs(h.value - exact) < 25)
    q = client.quantile("survey", "age", [0.25, 0.75], epsilon=1.0)
    assert q.value.shape == (2,) and q.value[0] < q.value[1]
    med = client.median("survey", "age", epsilon=1.0)
    assert 0 <= float(med) <= 100
    r = client.corr("survey", "age", "income", epsilon=1.0)
    assert -1 <= r.value <= 1
    v = client.var("survey", "age", epsilon=1.0, delta=1e-7)
    assert v.delta == 1e-7 and v.value >= 0
    assert client.std("survey", "age", epsilon=0.5).value >= 0
    assert client.sum("survey", "income", epsilon=0.5).value > 0
    assert client.cov("survey", "age", "income", epsilon=0.5, bounds=[[0, 100], [0, 200]]).ci()
    m90 = client.mean("survey", "age", epsilon=1.0, alpha=0.1)
    assert m90.ci(0.1) and m90.alpha == 0.1
    with pytest.raises(DataError, match="alpha"):
        m90.ci(0.05)


def test_dry_run_and_dummy_are_free(client: Curator) -> None:
    before = _spent(client)
    price = client.query("survey", "var", column="age", epsilon=2.5, dry_run=True)
    # rho: what a budget declared in zCDP would pay for it, epsilon^2/2
    assert price == {"dry_run": True, "query": "var", "dataset": "survey", "epsilon": 2.5,
                     "delta": 0.0, "rho": 3.125}  # fmt: skip
    d = client.mean("survey", "age", epsilon=5.0, dummy=True)
    assert d.raw["dummy"] is True and 0 <= d.value <= 100
    assert _spent(client) == before


def test_idempotent_retry_is_charged_once_and_refetchable(client: Curator) -> None:
    before = _spent(client)
    a = client.mean("survey", "age", epsilon=0.5, idempotency_key="retry-1")
    b = client.mean("survey", "age", epsilon=0.5, idempotency_key="retry-1")
    assert a.id == b.id and a.value == b.value and b.raw["replayed"]
    assert _spent(client) == pytest.approx(before + 0.5)
    again = client.result(a.id)
    assert again.value == a.value and again.ci() == a.ci()
    with pytest.raises(DataError, match="different request"):
        client.mean("survey", "age", epsilon=0.25, idempotency_key="retry-1")
    assert any(r["id"] == a.id for r in client.results())


def test_refusals_raise_the_library_exceptions(server: Any, client: Curator) -> None:
    _, key = server.analyst("dave", 0.5)
    with Curator(server.url, key) as small:
        small.mean("survey", "age", epsilon=0.4)
        with pytest.raises(BudgetExceededError, match="Nothing was charged") as info:
            small.mean("survey", "age", epsilon=0.2)
        assert info.value.remaining["epsilon"] == pytest.approx(0.1)
        assert small.budget()[0]["spent_epsilon"] == pytest.approx(0.4)
    with pytest.raises(PrivacyParameterError):
        client.mean("survey", "age", epsilon=-1.0)
    with pytest.raises(DataError):
        client.mean("survey", "nope", epsilon=1.0)
    with pytest.raises(NotFoundError):
        client.mean("nothing", "age", epsilon=1.0)
    with pytest.raises(NotFoundError):
        client.result("0" * 24)
    with pytest.raises(AuthenticationError), Curator(server.url, "dpk_x_" + "a" * 40) as bad:
        bad.budget()
    other = server.admin("POST", "/v1/admin/analysts", {"name": "erin"})
    with (
        pytest.raises(PermissionDeniedError, match="no budget"),
        Curator(server.url, other["key"]) as nob,
    ):
        nob.mean("survey", "age", epsilon=0.1)


def test_schemas_are_public(client: Curator) -> None:
    (ds,) = client.datasets()
    assert ds["name"] == "survey"
    assert [c["name"] for c in ds["columns"]] == ["age", "income", "sex"]


def test_admin_registers_a_dataset_over_http(server: Any) -> None:
    (server.root / "imports" / "small.csv").write_text("x\n1\n2\n3\nNaN\n")
    spec = {"name": "small", "source": "small.csv", "total_epsilon": 1.0,
            "columns": [{"name": "x", "type": "float", "bounds": [0, 10]}]}  # fmt: skip
    out = server.admin("POST", "/v1/admin/datasets", spec)
    assert out["name"] == "small"
    names = [d["name"] for d in server.admin("GET", "/v1/admin/datasets")["datasets"]]
    assert "small" in names
    bad = server.http.post(
        "/v1/admin/datasets",
        json={**spec, "name": "evil", "source": "../curator.toml"},
        headers={"Authorization": f"Bearer {server.admin_key}"},
    )
    assert bad.status_code == 400 and "import directory" in bad.json()["error"]["message"]


# -- the dry run's expected accuracy (shares this module's service) -------------------------
@pytest.fixture(scope="module")
def planner(server: Any) -> Any:
    _, key = server.analyst("dora", 20.0, 1e-6)
    with Curator(server.url, key) as c:
        yield c


@pytest.mark.parametrize(
    ("query", "params"),
    [
        ("count", {"epsilon": 0.5}),
        ("count", {"epsilon": 0.5, "delta": 1e-7, "alpha": 0.1}),
        ("sum", {"column": "age", "epsilon": 0.5}),
        ("histogram", {"column": "age", "bins": 4, "epsilon": 0.5}),
    ],
)
def test_dry_run_accuracy_is_the_answers_half_width(
    planner: Curator, query: str, params: Any
) -> None:
    client = planner
    spent = client.budget()[0]["spent_epsilon"]
    quote = client.query("survey", query, dry_run=True, **params)
    assert isinstance(quote, Quote) and client.budget()[0]["spent_epsilon"] == spent
    h = quote.half_width
    assert quote["accuracy"]["alpha"] == params.get("alpha", 0.05)
    assert h is not None and h > 0 and "noise interval +/-" in repr(quote)
    r = client.query("survey", query, **params)  # charged: the same half-width around it
    lo, hi = r.ci()
    widths = (
        [(b - a) / 2 for a, b in zip(lo, hi, strict=True)]
        if query == "histogram"
        else [(hi - lo) / 2]
    )
    assert all(math.isclose(w, h, rel_tol=1e-9) for w in widths)


def test_dry_run_without_accuracy_before_release(planner: Curator) -> None:
    client = planner
    quote = client.query("survey", "mean", column="age", epsilon=0.5, dry_run=True)
    assert "accuracy" not in quote and quote.half_width is None  # depends on the noisy count
    assert repr(quote) == "Quote(epsilon=0.5, delta=0, rho=0.125)"


@pytest.mark.parametrize(
    ("query", "params", "library"),
    [
        (
            "mean",
            {"column": "age", "epsilon": 0.5, "expected_n": 500},
            {"statistic": "mean", "bounds": "age", "expected_n": 500},
        ),
        (
            "var",
            {"column": "age", "epsilon": 0.5, "expected_n": 500, "ddof": 1},
            {"statistic": "var", "bounds": "age", "expected_n": 500, "ddof": 1},
        ),
        (
            "cov",
            {"columns": ["age", "income"], "epsilon": 0.5, "expected_n": 500},
            {"statistic": "cov", "bounds": ("age", "income"), "expected_n": 500},
        ),
    ],
)
def test_dry_run_accuracy_at_a_public_guess_of_the_rows(
    planner: Curator, server: Any, query: str, params: Any, library: Any
) -> None:
    cols = {c["name"]: c for c in planner.datasets()[0]["columns"]}
    b = library.pop("bounds")
    bounds = (
        tuple(cols[b]["bounds"])
        if isinstance(b, str)
        else tuple(tuple(cols[c]["bounds"]) for c in b)
    )
    quote = planner.query("survey", query, dry_run=True, **params)
    want = st.accuracy(epsilon=0.5, bounds=bounds, **library)
    assert math.isclose(quote.half_width, want, rel_tol=1e-12)


def test_dry_run_quantiles_give_a_rank_error_and_counts_are_integers(planner: Curator) -> None:
    cols = {c["name"]: c for c in planner.datasets()[0]["columns"]}
    quote = planner.query("survey", "quantiles", column="age", q=[0.5], epsilon=0.5, dry_run=True)
    want = st.accuracy("median", bounds=tuple(cols["age"]["bounds"]), epsilon=0.5)
    assert math.isclose(quote.half_width["rank"], want, rel_tol=1e-12)
    assert "rank +/-" in repr(quote)
    assert isinstance(planner.query("survey", "count", epsilon=0.1).value, int)


@pytest.mark.parametrize(
    ("query", "params"),
    [
        ("count", {}),
        ("sum", {"column": "age"}),
        ("mean", {"column": "age", "expected_n": 500}),
        ("histogram", {"column": "age", "bins": 4}),
    ],
)
def test_rho_is_paid_as_the_library_pays_it(planner: Curator, query: str, params: Any) -> None:
    client = planner
    quote = client.query("survey", query, dry_run=True, rho=0.05, delta=1e-7, **params)
    assert quote["delta"] == 1e-7 and 0 < quote["epsilon"] < 2
    spent = client.budget()[0]["spent_epsilon"]
    r = client.query("survey", query, rho=0.05, delta=1e-7, **params)
    assert math.isclose(client.budget()[0]["spent_epsilon"] - spent, quote["epsilon"], rel_tol=1e-9)
    if query != "mean":  # the mean's interval depends on its noisy count
        lo, hi = r.ci()
        widths = np.atleast_1d((np.asarray(hi) - np.asarray(lo)) / 2)
        assert np.allclose(widths, quote.half_width, rtol=1e-9)


def test_rho_requests_are_checked(planner: Curator) -> None:
    with pytest.raises(PrivacyParameterError, match="not both"):
        planner.query("survey", "count", rho=0.5, epsilon=1.0, delta=1e-7, dry_run=True)
    with pytest.raises(PrivacyParameterError, match="delta"):
        planner.query("survey", "count", rho=0.5, delta=1.5, dry_run=True)
    # without delta it is priced in rho alone: only a budget declared in rho can pay it
    alone = planner.query("survey", "count", rho=0.5, dry_run=True)
    assert alone["epsilon"] is None and alone["rho"] == 0.5
    with pytest.raises(DataError, match="unknown parameter"):  # only where the noise is Gaussian
        planner.query("survey", "quantiles", column="age", rho=0.5, delta=1e-7, dry_run=True)


def _budget_of(c: Curator) -> dict[str, Any]:
    return dict(c.budget()[0])


@pytest.fixture(scope="module")
def dan(server: Any) -> Any:
    _, key = server.analyst("dan", 1.0, 1e-6)
    with Curator(server.url, key) as c:
        c.count("survey", epsilon=0.75)  # 0.25 of ε left, all of δ
        yield c


def test_dry_run_warns_when_epsilon_would_run_out(dan: Curator) -> None:
    before = _budget_of(dan)
    quote = dan.query("survey", "count", epsilon=0.5, dry_run=True)
    refused = quote["would_be_refused"]
    assert refused["exhausted"] == ["epsilon"]
    assert refused["remaining"] == {"epsilon": 0.25} and refused["price"] == {"epsilon": 0.5}
    assert quote.would_be_refused == (
        "would be refused: remaining epsilon 0.25 < price 0.5 (your budget on this dataset)."
    )
    assert "would be refused: remaining epsilon 0.25 < price 0.5" in repr(quote)
    assert "accuracy" in quote  # the price and the accuracy are still given
    assert _budget_of(dan) == before  # free
    # a price that fits: no warning
    assert "would_be_refused" not in dan.query("survey", "count", epsilon=0.25, dry_run=True)
    # the real request meets the refusal the dry run announced, naming epsilon only
    with pytest.raises(BudgetExceededError, match=r"epsilon=0\.5 but") as err:
        dan.count("survey", epsilon=0.5)
    assert "delta" not in str(err.value)
    assert _budget_of(dan) == before


def test_dry_run_warns_when_delta_would_run_out(dan: Curator) -> None:
    quote = dan.query("survey", "var", column="age", epsilon=0.1, delta=1e-5, dry_run=True)
    assert quote["would_be_refused"]["exhausted"] == ["delta"]
    assert "remaining delta 1e-06 < price 1e-05" in quote.would_be_refused
    with pytest.raises(BudgetExceededError, match=r"delta=1e-05 but") as err:
        dan.var("survey", "age", epsilon=0.1, delta=1e-5)
    assert "epsilon=0.1 but" not in str(err.value)


def test_dry_run_warns_when_rho_would_run_out(server: Any) -> None:
    a = server.admin("POST", "/v1/admin/analysts", {"name": "rhoda"})
    server.admin("PUT", "/v1/admin/budgets", {"analyst": a["id"], "dataset": "survey", "rho": 0.1})
    with Curator(server.url, a["key"]) as c:
        # an ε-DP query is charged ρ = ε²/2 = 0.5 by a budget in ρ
        quote = c.query("survey", "count", epsilon=1.0, dry_run=True)
        assert quote["would_be_refused"]["exhausted"] == ["rho"]
        assert "remaining rho 0.1 < price 0.5" in quote.would_be_refused
        assert "would_be_refused" not in c.query("survey", "count", epsilon=0.4, dry_run=True)
        assert _budget_of(c)["spent_rho"] == 0.0


def test_dry_run_without_budget_says_so(server: Any) -> None:
    a = server.admin("POST", "/v1/admin/analysts", {"name": "nobody"})
    with Curator(server.url, a["key"]) as c:
        quote = c.query("survey", "count", epsilon=0.1, dry_run=True)
        assert quote.would_be_refused == (
            "would be refused: you have no budget on a dataset of that name."
        )
