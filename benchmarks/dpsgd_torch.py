"""DP-SGD step time: non-private SGD, dpkit.torch, and Opacus (when installed), CPU or GPU.

Two models from the DP-SGD literature's usual benchmarks: an MLP 784-512-512-10 with batch 256,
and a small CNN with GroupNorm on 3×32×32 images with batch 128 (also 256 on a GPU). Each
private step is one logical batch of exactly the physical size (clipping and noise included;
sampling excluded for all). Run: ``python benchmarks/dpsgd_torch.py`` (CPU, 2 threads by default,
``--threads`` to change) or ``--device cuda`` (data and model on the GPU; dpkit's noise then made
on the device). Times are medians of repeated steps (on a GPU each timed step ends with a
synchronisation); ratios are to the non-private step of the same run. "noise share" is the mean
time of the noise alone per step (pool refills included, over several refills) over the mean
private step. ``--profile`` (CUDA) prints, for one clip-only dpkit step of each model, the top
ops by device and host time and the number of host-device synchronisations. ``--ops`` counts
the compute operations of one step (aten operations that are not views, from the CPU profiler):
a proxy for kernel launches where no GPU is at hand.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from _timing import table
from dpkit.random import seeded
from dpkit.torch import _clip, make_private
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


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def step_times(fn: Callable[[], object], repeats: int) -> list[float]:
    fn()  # warm-up
    fn()
    _sync()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        _sync()
        times.append(time.perf_counter() - t)
    return times


def median_time(fn: Callable[[], object], repeats: int) -> float:
    return statistics.median(step_times(fn, repeats))


def plain_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    return step


def dpkit_run(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, noise: str = "auto") -> Any:
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.utils.data.TensorDataset(x, y)
    b = len(y)
    return make_private(
        model, opt, data, n_samples=100 * b, batch_size=b, epochs=10_000, max_grad_norm=1.0,
        delta=1e-5, noise_multiplier=1.0, rng=seeded(0), noise=noise,
    )  # fmt: skip


def noise_time(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, noise: str, steps: int = 64
) -> float:
    """Mean time of one step's noise alone (64 steps: several refills of a device pool)."""
    opt = dpkit_run(model, x, y, noise=noise).optimizer
    if steps == 1 and opt._device_noise is not None:
        opt._device_noise.ahead = 1  # one step's noise per call: each timed call draws it
    n = sum(p.numel() for p in opt.clipper.params)
    flat = torch.zeros(n, dtype=torch.float64, device=x.device)
    opt._noisy(flat)
    _sync()
    t = time.perf_counter()
    for _ in range(steps):
        opt._noisy(flat)
    _sync()
    return (time.perf_counter() - t) / steps


def dpkit_step(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    noise: bool = True,
    where: str = "auto",
) -> Callable[[], None]:
    run = dpkit_run(model, x, y, noise=where)
    b = len(y)
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


def profile_step(title: str, step: Callable[[], None]) -> None:
    """Print the top ops of one step by device and by host time, and its host-device syncs."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        step()
    _sync()
    acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with profile(activities=acts) as prof:
        step()
        _sync()
    avg = prof.key_averages()
    for key in ("cuda_time_total", "cpu_time_total"):
        print(f"\n{title}: top 15 ops by {key}")
        print(avg.table(sort_by=key, row_limit=15, max_name_column_width=48))
    # synchronisations: torch warns at each one in "warn" mode; count them over one step
    where: dict[str, int] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    for w in caught:
        if "synchroniz" in str(w.message):
            k = f"{w.filename.rsplit('/', 1)[-1]}:{w.lineno}"
            where[k] = where.get(k, 0) + 1
    print(f"{title}: {sum(where.values())} host-device synchronisations in one step:", where)


# operations that only make views or metadata (no kernel of their own on a device)
_META = {
    f"aten::{n}"
    for n in [
        "view",
        "as_strided",
        "as_strided_",
        "reshape",
        "_reshape_alias",
        "detach",
        "detach_",
        "empty",
        "empty_strided",
        "resize_",
        "resolve_conj",
        "lift_fresh",
        "_unsafe_view",
        "t",
        "transpose",
        "permute",
        "expand",
        "expand_as",
        "unsqueeze",
        "squeeze",
        "select",
        "slice",
        "alias",
        "unfold",
        "to",
        "contiguous",
        "flatten",
        "narrow",
        "split",
        "unbind",
        "chunk",
        "view_as",
        "result_type",
        "numpy_T",
    ]
}


def count_ops(step: Callable[[], None]) -> int:
    """Compute operations in one step (a proxy for kernel launches, from the CPU profiler): aten
    operations that are not views and call no other compute operation."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(2):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()

    def compute(e: Any) -> bool:
        return bool(e.name.startswith("aten::") and e.name not in _META)

    def inner(e: Any) -> bool:
        return any(compute(c) or inner(c) for c in e.cpu_children)

    return sum(1 for e in prof.events() if compute(e) and not inner(e))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument(
        "--profile", action="store_true", help="profile one clip-only dpkit step (CUDA only)"
    )
    parser.add_argument(
        "--ops", action="store_true", help="count compute operations per step (CPU profiler)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    gpu = device.type == "cuda"
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
    if gpu:
        cases.append(("CNN GroupNorm 3x32x32, batch 256", cnn, (256, 3, 32, 32)))
    # where dpkit's noise is made: on a GPU the device (the default there); on the CPU NumPy's
    # path (the default there), the torch path's noise being timed alone (it is far slower)
    wheres = ["device"] if gpu else ["numpy"]
    where_on = f"{torch.cuda.get_device_name(device)}" if gpu else f"CPU, {args.threads} threads"
    for title, make, shape in cases:
        x = torch.from_numpy(gen.standard_normal(shape).astype(np.float32)).to(device)
        y = torch.from_numpy(gen.integers(0, 10, shape[0])).to(device)
        torch.manual_seed(0)
        base = median_time(plain_step(make().to(device), x, y), args.repeats)
        rows = [("non-private SGD", f"{base * 1e3:.2f}", "1.00", "")]
        t = median_time(dpkit_step(make().to(device), x, y, noise=False), args.repeats)
        rows.append(("dpkit clip only", f"{t * 1e3:.2f}", f"{t / base:.2f}", ""))
        if gpu:  # the other way to handle dropped rows: ask the host (one sync per batch)
            _clip.ZERO_ON_DEVICE = False
            t = median_time(dpkit_step(make().to(device), x, y, noise=False), args.repeats)
            _clip.ZERO_ON_DEVICE = True
            rows.append(("dpkit clip only, host check", f"{t * 1e3:.2f}", f"{t / base:.2f}", ""))
        for where in wheres:
            times = step_times(dpkit_step(make().to(device), x, y, where=where), args.repeats)
            t = statistics.median(times)
            share = noise_time(make().to(device), x, y, where) / statistics.mean(times)
            rows.append(
                (f"dpkit (exact noise, {where})", f"{t * 1e3:.2f}", f"{t / base:.2f}",
                 f"{100 * share:.0f}%")
            )  # fmt: skip
        for m in modes:
            t = median_time(opacus_step(make().to(device), x, y, m), args.repeats)
            rows.append((f"opacus {m}", f"{t * 1e3:.2f}", f"{t / base:.2f}", ""))
        if not gpu:
            for where in ("numpy", "device"):
                t = noise_time(make(), x, y, where, steps=1 if where == "device" else 8)
                rows.append((f"noise alone ({where})", f"{t * 1e3:.2f}", f"{t / base:.2f}", ""))
        print(f"\n{title} ({where_on}, median of {args.repeats} steps)")
        print(table(rows, ("step", "ms", "x non-private", "noise share")), flush=True)
        if args.ops:
            counts = [
                ("non-private SGD", count_ops(plain_step(make().to(device), x, y))),
                ("dpkit clip only", count_ops(dpkit_step(make().to(device), x, y, noise=False))),
                ("dpkit (exact noise)", count_ops(dpkit_step(make().to(device), x, y))),
            ]
            print(table([(k, str(v)) for k, v in counts], ("step", "compute ops")), flush=True)
        if args.profile and gpu:
            profile_step(
                f"{title}, dpkit clip only", dpkit_step(make().to(device), x, y, noise=False)
            )


if __name__ == "__main__":
    main()
