"""DP-SGD step time on CPU: non-private SGD, dpkit.torch, and Opacus (when installed).

Two models from the DP-SGD literature's usual benchmarks: an MLP 784-512-512-10 with batch 256,
and a small CNN with GroupNorm on 3×32×32 images with batch 128. Each private step is one
logical batch of exactly the physical size (clipping and noise included; sampling excluded for
all). Run: ``python benchmarks/dpsgd_torch.py`` (2 threads by default, ``--threads`` to change).
Times are medians of repeated steps; ratios are to the non-private step of the same run.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from _timing import table
from dpkit.random import seeded
from dpkit.torch import make_private
from dpkit.torch._sampling import LogicalBatch


def mlp() -> nn.Module:
    return nn.Sequential(
        nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
        nn.Linear(512, 10),
    )  # fmt: skip


def cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.GroupNorm(8, 32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.GroupNorm(8, 64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 64, 3, padding=1), nn.GroupNorm(8, 64), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
        nn.Flatten(), nn.Linear(256, 10),
    )  # fmt: skip


def median_time(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def plain_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    return step


def dpkit_step(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, noise: bool = True
) -> Callable[[], None]:
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.utils.data.TensorDataset(x, y)
    b = len(y)
    run = make_private(
        model, opt, data, n_samples=100 * b, batch_size=b, epochs=10_000, max_grad_norm=1.0,
        delta=1e-5, noise_multiplier=1.0, rng=seeded(0),
    )  # fmt: skip
    popt = run.optimizer
    crit = nn.CrossEntropyLoss(reduction="none")

    def step() -> None:
        popt.zero_grad()
        # the same full batch each time (timing only): a logical batch of the private loader
        batch = LogicalBatch(run.loader, np.arange(b))
        run.loader.current = batch
        for xb, yb in batch:
            popt.backward(crit(model(xb), yb))
        if noise:
            popt.step()
        else:
            popt.clipper.reset()

    return step


def opacus_step(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, mode: str
) -> Callable[[], None]:
    from opacus import PrivacyEngine  # type: ignore[import-not-found]

    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=len(y))
    engine = PrivacyEngine()
    crit = nn.CrossEntropyLoss()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if mode == "ghost":
            model, opt, crit, loader = engine.make_private(
                module=model, optimizer=opt, data_loader=loader, criterion=crit,
                noise_multiplier=1.0, max_grad_norm=1.0, poisson_sampling=False,
                grad_sample_mode="ghost",
            )  # fmt: skip
        else:
            model, opt, loader = engine.make_private(
                module=model, optimizer=opt, data_loader=loader, noise_multiplier=1.0,
                max_grad_norm=1.0, poisson_sampling=False, grad_sample_mode=mode,
            )  # fmt: skip

    def step() -> None:
        opt.zero_grad()
        crit(model(x), y).backward()
        opt.step()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    try:
        import opacus  # type: ignore[import-not-found]  # noqa: F401

        modes = ["hooks", "ghost"]
    except ImportError:
        modes = []
        print("opacus not installed: comparing with non-private SGD only")
    gen = np.random.default_rng(0)
    cases = [
        ("MLP 784-512-512-10, batch 256", mlp, (256, 784)),
        ("CNN GroupNorm 3x32x32, batch 128", cnn, (128, 3, 32, 32)),
    ]
    for title, make, shape in cases:
        x = torch.from_numpy(gen.standard_normal(shape).astype(np.float32))
        y = torch.from_numpy(gen.integers(0, 10, shape[0]))
        torch.manual_seed(0)
        base = median_time(plain_step(make(), x, y), args.repeats)
        rows = [("non-private SGD", f"{base * 1e3:.1f}", "1.00")]
        for label, step in (
            ("dpkit clip only", dpkit_step(make(), x, y, noise=False)),
            ("dpkit (exact noise)", dpkit_step(make(), x, y)),
            *((f"opacus {m}", opacus_step(make(), x, y, m)) for m in modes),
        ):
            t = median_time(step, args.repeats)
            rows.append((label, f"{t * 1e3:.1f}", f"{t / base:.2f}"))
        print(f"\n{title} ({args.threads} threads, median of {args.repeats} steps)")
        print(table(rows, ("step", "ms", "x non-private")))


if __name__ == "__main__":
    main()
