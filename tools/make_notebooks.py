"""Write the example notebooks of docs/notebooks/ and execute them, keeping their outputs.

    python tools/make_notebooks.py            # all four
    python tools/make_notebooks.py curator    # one

The site renders the stored outputs (mkdocs-jupyter, execute: false); tests/docs/test_notebooks.py
executes every notebook again, so a notebook that no longer runs fails the suite.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parents[1] / "docs" / "notebooks"


def md(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(text.strip())


def code(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(text.strip())


QUICKSTART = [
    md("""
# Quick start: private statistics with error bars

A budget, a few private statistics of one sensitive column, and each answer's 95% interval. The
noise is secure (AES counter mode keyed by the operating system), so every run gives other
numbers: this notebook's outputs are one such run.
"""),
    code("""
import matplotlib.pyplot as plt
import numpy as np

import dpkit as dp

# Sensitive data: 10,000 incomes in thousands, bounded by a declared, public range.
incomes = np.random.default_rng(7).gamma(shape=2.0, scale=18.0, size=10_000).clip(0, 200)
acct = dp.Accountant(dp.ApproxDP(epsilon=1.0, delta=1e-6))
"""),
    md("""
Each call validates its input, charges the accountant, then releases. Bounds are declared, never
read from the data.
"""),
    code("""
bounds = (0, 200)
releases = {
    "mean": dp.mean(incomes, bounds=bounds, epsilon=0.2, accountant=acct),
    "std": dp.std(incomes, bounds=bounds, epsilon=0.2, accountant=acct),
    "count": dp.count(incomes, epsilon=0.1, accountant=acct),
}
exact = {"mean": incomes.mean(), "std": incomes.std(), "count": incomes.size}
for name, r in releases.items():
    lo, hi = r.ci(0.05)
    print(f"{name:<13} {r.value:9.3f}   95% CI [{lo:9.3f}, {hi:9.3f}]   exact {exact[name]:9.3f}")
print("spent:", acct.spent, " remaining:", acct.remaining)
"""),
    md("""
A median by the exponential mechanism has no interval computable from its value alone (its
error depends on the data); two extra quantiles bracket it instead.
"""),
    code("""
qs = [dp.quantile(incomes, q, bounds=bounds, epsilon=0.1, accountant=acct).value
      for q in (0.45, 0.5, 0.55)]
print(f"median {qs[1]:.2f}, bracketed by the 0.45 and 0.55 quantiles [{qs[0]:.2f}, {qs[2]:.2f}]; "
      f"exact {np.median(incomes):.2f}")
"""),
    md("""
The intervals cover the privacy noise (and, where it says so, the estimator's own error): the
exact value lies inside them in at least 95% of runs.
"""),
    code("""
names = ["mean", "std"]
values = np.array([releases[n].value for n in names])
cis = np.array([releases[n].ci(0.05) for n in names])
fig, ax = plt.subplots(figsize=(6, 2.8))
y = np.arange(len(names))
ax.errorbar(values, y, xerr=[values - cis[:, 0], cis[:, 1] - values], fmt="o", capsize=4,
            label="private, 95% CI")
ax.scatter([exact[n] for n in names], y, marker="x", color="black", zorder=3, label="exact")
ax.set_yticks(y, names)
ax.set_xlabel("income (thousands)")
ax.legend(loc="lower right")
fig.tight_layout()
"""),
    md("""
The budget cannot be overspent: a release that would not fit is refused before anything is
computed, and nothing is charged.
"""),
    code("""
try:
    dp.mean(incomes, bounds=bounds, epsilon=0.5, accountant=acct)
except dp.BudgetExceededError as exc:
    print("refused:", exc)
print("remaining:", acct.remaining)
"""),
]

GROUPBY = [
    md("""
# Per-person group-by with key selection

Real tables have many rows per person. `dpkit.frame` protects a declared *privacy unit* (here a
user id): each person's rows are bounded (`max_groups`, `max_rows`) before anything is summed, and
the noise is calibrated to what one person can change.
"""),
    code("""
import matplotlib.pyplot as plt
import numpy as np
import polars as pl

import dpkit.frame as dpf
from dpkit.accounting import Accountant, ApproxDP

g = np.random.default_rng(3)
n = 60_000
sites = np.array(["north", "south", "east", "west", "harbour", "airport"])
visits = pl.DataFrame({
    "user": g.integers(0, 8_000, n),
    "site": sites[g.choice(6, n, p=[0.3, 0.25, 0.2, 0.15, 0.07, 0.03])],
    "minutes": g.exponential(25.0, n),
})
acct = Accountant(ApproxDP(epsilon=3.0, delta=1e-5))
visits.head()
"""),
    md("""
## Public keys

When the set of groups is public (the sites are known in advance), exactly those keys are
released, each with its own noise. `explain()` shows the plan and its cost and charges nothing.
"""),
    code("""
q = dpf.Query(visits, privacy_unit="user").group_by(
    "site", public_keys=list(sites), max_groups=2, max_rows=4)
aggs = (dpf.count_units(), dpf.mean("minutes", bounds=(0, 120)))
print(q.agg(*aggs).explain(epsilon=1.0, delta=1e-6))
"""),
    code("""
r = q.agg(*aggs).release(epsilon=1.0, delta=1e-6, accountant=acct)
r.frame.sort("site")
"""),
    code("""
f = r.frame.sort("site")
exact = (visits.group_by("site").agg(pl.col("user").n_unique().alias("exact_units"))
         .sort("site"))
fig, ax = plt.subplots(figsize=(6, 3))
x = np.arange(len(f))
est = f["units"].to_numpy()
ax.errorbar(x, est, yerr=[est - f["units_lo"].to_numpy(), f["units_hi"].to_numpy() - est],
            fmt="o", capsize=4, label="private, 95% CI")
ax.scatter(x, exact["exact_units"].to_numpy(), marker="x", color="black", zorder=3, label="exact")
ax.set_xticks(x, f["site"].to_list())
ax.set_ylabel("distinct users")
ax.legend()
fig.tight_layout()
"""),
    md("""
## Private key selection

When the keys themselves are private (free-text categories, rare values), `public_keys=None`
selects them privately: a key is released only if enough distinct users hold it, after noise, so
a key held by a single person appears with probability at most δ.
"""),
    code("""
rare = pl.DataFrame({"user": [90_001, 90_002], "site": ["my house", "my house"],
                     "minutes": [10.0, 12.0]})
table = pl.concat([visits, rare])
q2 = dpf.Query(table, privacy_unit="user").group_by("site", max_groups=1, max_rows=4)
r2 = q2.agg(dpf.count()).release(epsilon=1.0, delta=1e-6, accountant=acct)
print(sorted(r2.frame["site"].to_list()))   # "my house" (two users) is not among them
print("spent:", acct.spent)
"""),
]

CURATOR = [
    md("""
# The curator service from the client's side

The data stay with the curator; an analyst holds an API key and a budget and sends queries over
HTTP. This notebook starts a real service on loopback (an SQLite ledger in a temporary folder),
then works only through `dpkit.client.Curator`, as an analyst would.
"""),
    code("""
import csv, socket, tempfile, threading, time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import uvicorn

from dpkit.server import ServerConfig, create_app, new_key

root = Path(tempfile.mkdtemp())
(root / "imports").mkdir()
g = np.random.default_rng(11)
with (root / "imports" / "survey.csv").open("w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["age", "income", "region"])
    for _ in range(4000):
        w.writerow([f"{np.clip(g.normal(45, 15), 18, 95):.1f}", f"{np.exp(g.normal(3.6, 0.5)):.2f}",
                    ("north", "south", "east", "west")[int(g.integers(0, 4))]])
_, admin_key, admin_hash = new_key("admin")
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
config = ServerConfig(
    ledger=str(root / "ledger.db"), data_dir=root / "data", import_dir=root / "imports",
    admin_key_hash=admin_hash, host="127.0.0.1", port=port,
    datasets=({"name": "survey", "source": "survey.csv", "total_epsilon": 3.0, "total_delta": 1e-6,
               "columns": [{"name": "age", "type": "float", "bounds": [18, 95]},
                           {"name": "income", "type": "float", "bounds": [0, 500]},
                           {"name": "region", "type": "category",
                            "categories": ["north", "south", "east", "west"]}]},),
)
server = uvicorn.Server(uvicorn.Config(create_app(config), host="127.0.0.1", port=port,
                                       log_level="warning"))
thread = threading.Thread(target=server.run, daemon=True)
thread.start()
while not server.started:
    time.sleep(0.05)
url = f"http://127.0.0.1:{port}"
print("service at", url)
"""),
    md("""
The admin creates an analyst and gives her a budget on the dataset; from here on, everything
goes through the client.
"""),
    code("""
from dpkit.client import Curator

with Curator(url, admin_key) as admin:
    analyst = admin.admin("POST", "/v1/admin/analysts", {"name": "ada"})
    admin.admin("PUT", "/v1/admin/budgets",
                {"analyst": analyst["id"], "dataset": "survey", "epsilon": 1.0})

ada = Curator(url, analyst["key"])
ada.budget()
"""),
    code("""
price = ada.query("survey", "mean", column="age", epsilon=0.25, dry_run=True)  # free
print("a dry run prices the query without charging it:", price["epsilon"])
m = ada.mean("survey", "age", epsilon=0.25)
med = ada.median("survey", "income", epsilon=0.25)
print(f"mean age     {m.value:7.2f}  95% CI {tuple(round(v, 2) for v in m.ci())}")
print(f"median income {med.value:6.2f}  (exponential mechanism: no interval from the value alone)")
"""),
    code("""
import dpkit.frame as dpf

t = ada.group_by("survey", "region", dpf.count(), dpf.mean("income", bounds=(0, 500)),
                 epsilon=0.4)
frame = t.frame.sort("region")
fig, ax = plt.subplots(figsize=(6, 3))
x = np.arange(len(frame))
est = frame["mean_income"].to_numpy()
ax.errorbar(x, est, yerr=[est - frame["mean_income_lo"].to_numpy(),
                          frame["mean_income_hi"].to_numpy() - est], fmt="o", capsize=4)
ax.set_xticks(x, frame["region"].to_list())
ax.set_ylabel("mean income, 95% CI")
fig.tight_layout()
frame
"""),
    md("""
The budget is enforced by the service's ledger: a query that would overspend is refused before
anything is computed.
"""),
    code("""
import dpkit.errors

try:
    ada.mean("survey", "income", epsilon=0.5)
except dpkit.errors.BudgetExceededError as exc:
    print("refused:", exc)
print(ada.budget())
"""),
    code("""
ada.close()
server.should_exit = True
thread.join(timeout=10)
print("stopped; the ledger keeps every charge in", root / "ledger.db")
"""),
]

SYNTHETIC = [
    md("""
# Synthetic data and its utility report

A synthesizer fits a model to noisy marginals (ε-DP for the fit); samples drawn from the model are
post-processing and cost nothing more. The utility report compares the synthetic table with the
real one — it reads the real data, so it is *not* private and stays with the curator.
"""),
    code("""
import matplotlib.pyplot as plt
import numpy as np

from dpkit.accounting import Accountant, ApproxDP
from dpkit.release import Synthesizer, utility_report
from dpkit.release._examples import load_randhie, randhie_domain

real = load_randhie()                   # RAND Health Insurance Experiment: 20,190 person-years
domain = randhie_domain()               # declared, public: bounds and categories of each column
acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6))
real.head()
"""),
    code("""
synth = Synthesizer(domain, epsilon=1.0, delta=1e-6, method="aim")
model = synth.fit(real, accountant=acct)
synthetic = model.sample(len(real), output="pandas")
print("spent:", acct.spent)
synthetic.head()
"""),
    code("""
# plots=False: the report's own figures are for its HTML page (report.to_html(path)).
report = utility_report(
    real, synthetic, domain, target="idp", plots=False, synthesizer=synth
)
print(report.summary())
"""),
    md("""
Its first lines are the release's provenance — method, ε, δ and ρ, the public domain, the dpkit
version — and no seed. KS is the Kolmogorov–Smirnov distance of a numeric column's marginal, TVD
the total variation distance of its binned marginal (and the means over pairs and triples of
columns); the last line trains a classifier on the synthetic table and tests it on held-out real
records. Two marginals, side by side:
"""),
    code("""
fig, axes = plt.subplots(1, 2, figsize=(9, 3))
bins = np.arange(0, 21, 2)  # a third of the person-years saw no doctor: the atom at 0
axes[0].hist([real["mdvis"], synthetic["mdvis"]], bins=bins, density=True,
             label=["real", "synthetic"])
axes[0].set_xlabel("doctor visits in the year (mdvis)")
axes[0].legend()
flags = ["hlthg", "hlthf", "hlthp"]  # self-rated health good, fair, poor (else excellent)
x = np.arange(len(flags))
axes[1].bar(x - 0.2, [np.mean(real[f] == 1) for f in flags], 0.4, label="real")
axes[1].bar(x + 0.2, [np.mean(synthetic[f].astype(int) == 1) for f in flags], 0.4,
            label="synthetic")
axes[1].set_xticks(x, ["good", "fair", "poor"])
axes[1].set_xlabel("self-rated health (share)")
fig.tight_layout()
"""),
]

NOTEBOOKS = {
    "quickstart": QUICKSTART,
    "groupby": GROUPBY,
    "curator": CURATOR,
    "synthetic": SYNTHETIC,
}


def build(name: str) -> Path:
    # The kernel runs in docs/notebooks: it must import this tree's dpkit.
    src = str(HERE.parents[1] / "src")
    os.environ["PYTHONPATH"] = os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])
    nb = nbformat.v4.new_notebook()
    nb.cells = NOTEBOOKS[name]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}
    ).execute()
    path = HERE / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


if __name__ == "__main__":
    for name in sys.argv[1:] or list(NOTEBOOKS):
        print("wrote", build(name))
