"""The private optimizer: clipped sums over a logical batch, exact noise, one update per step."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor

from dpkit.errors import BudgetExceededError, PrivacyParameterError
from dpkit.noise import gaussian
from dpkit.random import is_secure
from dpkit.torch._clip import Clipper
from dpkit.torch._device_noise import DeviceGaussian
from dpkit.torch._plan import TrainingPlan
from dpkit.torch._sampling import LogicalBatch, PrivateLoader

__all__ = ["PrivateOptimizer"]


class PrivateOptimizer:
    """Wraps a ``torch.optim.Optimizer``; its updates use noisy clipped gradients only.

    Use it as the wrapped optimizer, with :meth:`backward` in place of ``loss.backward()``::

        for batch in loader:              # one logical batch = one DP-SGD step
            optimizer.zero_grad()
            for x, y in batch:            # fixed-shape physical batches
                optimizer.backward(criterion(model(x), y))   # per-example losses, shape (B,)
            optimizer.step()

    :meth:`step` adds Gaussian noise of standard deviation ``plan.sigma`` to the sum of the
    clipped per-example gradients (dpkit's exact discrete Gaussian on the grid ``2**plan.grid``,
    from dpkit's secure generator unless a seeded one was given), divides by the public expected
    batch size ``plan.expected_batch_size`` and lets the wrapped optimizer update. A step with an
    empty batch is noised like any other. The run was paid for when it was made private; a step
    past ``plan.steps`` raises :class:`~dpkit.errors.BudgetExceededError` before any noise.

    Where the noise is made (``noise``): ``"numpy"`` draws it with :func:`dpkit.noise.gaussian`
    on the CPU (AES counter mode, threads); ``"device"`` draws the same distribution on the
    parameters' device with :class:`~dpkit.torch._device_noise.DeviceGaussian` (ChaCha20 in torch
    integer ops, keyed from ``gen``), pooled over several steps; ``"auto"`` takes ``"device"``
    for parameters off the CPU and ``"numpy"`` (the faster there) on it. Either way the sums, the
    rounding to the grid and the update stay where the parameters are.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        *,
        clipper: Clipper,
        plan: TrainingPlan,
        loader: PrivateLoader,
        gen: np.random.Generator,
        noise: str = "auto",
    ) -> None:
        if noise not in ("auto", "numpy", "device"):
            raise PrivacyParameterError('noise must be "auto", "numpy" or "device".')
        devices = {p.device for p in clipper.params}
        if len(devices) != 1:
            raise PrivacyParameterError(
                "the model's trainable parameters are on several devices: DP-SGD needs them on "
                "one (the clipped sums are noised and added together)."
            )
        self.device = devices.pop()
        if noise == "auto":
            noise = "numpy" if self.device.type == "cpu" else "device"
        self.noise = noise
        self._device_noise: DeviceGaussian | None = None
        if noise == "device":
            self._device_noise = DeviceGaussian(plan.sigma, plan.grid, gen=gen, device=self.device)
        self.original_optimizer = optimizer
        self.clipper = clipper
        self.plan = plan
        self.loader = loader
        self._gen = gen
        self.steps_taken = 0
        # an audit's gradient canaries (dpkit.torch.GradientCanaries), added before the noise
        self.canaries: Any = None
        # the logical batch the running sums come from, and its physical batches already used:
        # a step charged for one Poisson draw must hold each sampled example once, no other
        self._batch: LogicalBatch | None = None
        self._used: set[int] = set()
        managed = {id(p) for p in clipper.params}
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad and id(p) not in managed:
                    raise PrivacyParameterError(
                        "the optimizer updates a parameter that is not a trainable parameter of "
                        "the private model; give the optimizer model.parameters()."
                    )

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.original_optimizer.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the accumulated clipped sums and the parameters' gradients."""
        self.original_optimizer.zero_grad(set_to_none=set_to_none)
        self.clipper.reset()
        self._batch = None
        self._used = set()

    def backward(self, losses: Tensor, *, mask: Tensor | None = None) -> None:
        """Clip the per-example gradients of ``losses`` (shape (B,)) and add them to the sums.

        ``losses`` must be those of the physical batch of the private loader being iterated
        (the sampling the accounting assumes), each physical batch used once, all from one
        logical batch per step. ``mask`` (bool, shape (B,)) may drop more examples; padded rows
        stay masked out whatever it says.
        """
        batch = self.loader.current
        if batch is None or batch.mask is None or batch.done >= batch.physical_batches:
            self.clipper.discard()
            raise PrivacyParameterError(
                "backward() needs the losses of a physical batch of the private loader being "
                "iterated: other data is not sampled as the accounting assumes."
            )
        if self._batch is not None and self._batch is not batch:
            self.clipper.discard()
            raise PrivacyParameterError(
                "the sums hold another logical batch's gradients: call zero_grad() (or step()) "
                "before a new logical batch; one step is charged for one Poisson draw."
            )
        if batch.done in self._used:
            self.clipper.discard()
            raise PrivacyParameterError(
                "backward() may be called once per physical batch: a second call would count "
                "its examples twice."
            )
        real = batch.mask.to(losses.device, non_blocking=True)  # where the norms are
        if mask is not None:
            if not isinstance(mask, Tensor) or mask.shape != real.shape:
                self.clipper.discard()
                raise PrivacyParameterError("mask must be a bool tensor of shape (B,).")
            real = real & mask.to(device=real.device, dtype=torch.bool)
        self.clipper.accumulate(losses, real, group=self.loader.group)
        self._batch = batch
        self._used.add(batch.done)

    def step(self, closure: None = None) -> None:
        """Noise the clipped sum, normalise by the expected batch size, update the parameters."""
        if closure is not None:
            raise PrivacyParameterError("closures are not supported: call backward() first.")
        if self.steps_taken >= self.plan.steps:
            raise BudgetExceededError(
                f"the plan paid for {self.plan.steps} steps and all have been taken; make a new "
                "private run (and pay for it) to train further."
            )
        batch: LogicalBatch | None = self.loader.current
        if self._batch is not None and self._batch is not batch:
            raise PrivacyParameterError(
                "the sums hold another logical batch's gradients: one step is one Poisson draw."
            )
        if batch is not None and batch.done < batch.physical_batches:
            raise PrivacyParameterError(
                "step() before every physical batch of the logical batch was used: iterate the "
                "whole batch (the sampling the accounting assumes) before stepping."
            )
        sums = self.clipper.sums
        flat = torch.cat([s.reshape(-1) for s in sums]).to(torch.float64)
        if self.canaries is not None:
            self.canaries.insert(flat)
        out = self._noisy(flat)
        if self.canaries is not None:
            self.canaries.observe(out)
        out /= self.plan.expected_batch_size
        out *= self.clipper.output_scale  # adaptive clipping: back from C₀ to C_t
        k = 0
        for p, s in zip(self.clipper.params, sums, strict=True):
            n = s.numel()
            p.grad = out[k : k + n].reshape(p.shape).to(p.dtype)
            k += n
        self.steps_taken += 1
        self.loader.position = self.steps_taken
        self.original_optimizer.step()
        self.clipper.adapt(
            self._gen,
            count_sigma=self.plan.count_sigma,
            count_grid=self.plan.count_grid,
            expected=self.plan.expected_batch_size,
        )
        self.clipper.reset()
        self.loader.current = None
        self._batch = None
        self._used = set()

    def _noisy(self, flat: Tensor) -> Tensor:
        """``round(flat) + 2**grid · Z`` (float64) with exact discrete Gaussian Z, on flat's
        device."""
        if self._device_noise is not None:
            return self._device_noise.add(flat)
        x = flat.cpu().numpy()  # the CPU path (noise="numpy"): no copy when already on the CPU
        noisy = np.asarray(gaussian(x, self.plan.sigma, grid=self.plan.grid, rng=self._gen))
        return torch.from_numpy(noisy).to(flat.device)

    def state_dict(self) -> dict[str, Any]:
        """The wrapped optimizer's state, the private steps taken and where the randomness is.

        A run seeded explicitly (not dpkit's secure generator) also saves its generator's state
        and the device noise stream's block counter: rebuilt from the same seed and resumed, it
        continues both streams instead of drawing the noise and batches of its first steps
        again. A secure run saves neither (its resumed run is keyed afresh from the OS).
        """
        state: dict[str, Any] = {
            "optimizer": self.original_optimizer.state_dict(),
            "steps_taken": self.steps_taken,
        }
        if self.clipper.adaptive:
            state["clip_norm"] = self.clipper.clip_norm
        if self.clipper.layer_norms is not None:
            state["clip_norms"] = list(self.clipper.layer_norms)
        if not is_secure(self._gen):
            state["rng"] = _plain(self._gen.bit_generator.state)
            if self._device_noise is not None:
                state["noise_block"] = self._device_noise.counter
        loader = self.loader.state_dict()
        if loader:
            state["loader"] = loader
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (the steps taken count against the same plan).

        Noise pooled on the device is discarded: no noise drawn before the load is used after it.
        A seeded run continues its generator and its device noise stream from where the
        checkpoint left them (the stream only moves forward); resuming a seeded run from a
        checkpoint without them is refused, as it would replay its first steps' noise.
        """
        taken = state["steps_taken"]
        if isinstance(taken, bool) or not isinstance(taken, int) or taken < self.steps_taken:
            raise PrivacyParameterError("steps_taken must be an int, at least the steps taken.")
        secure = is_secure(self._gen)
        if not secure and taken > 0 and "rng" not in state:
            raise PrivacyParameterError(
                "this run is seeded and the checkpoint does not hold its generator's state: "
                "resumed, it would draw the noise of its first steps again. Save the checkpoint "
                "with this version's state_dict(), or resume with secure randomness (rng=None)."
            )
        c = state.get("clip_norm")
        if (
            self.clipper.adaptive
            and c is not None
            and (isinstance(c, bool) or not isinstance(c, float) or not 0 < c < math.inf)
        ):
            raise PrivacyParameterError("clip_norm must be a finite positive float.")
        norms = state.get("clip_norms")
        if self.clipper.layer_norms is not None and norms is not None:
            if not isinstance(norms, list) or len(norms) != len(self.clipper.layer_norms):
                raise PrivacyParameterError("clip_norms must hold one norm per layer.")
            for v in norms:
                if isinstance(v, bool) or not isinstance(v, float) or not 0 < v < math.inf:
                    raise PrivacyParameterError("clip_norms must be finite positive floats.")
        self.original_optimizer.load_state_dict(state["optimizer"])
        if not secure and "rng" in state:
            try:
                self._gen.bit_generator.state = _unplain(state["rng"])
            except (TypeError, ValueError, KeyError) as exc:
                raise PrivacyParameterError(
                    "the checkpoint's generator state does not fit this run's generator."
                ) from exc
        if self._device_noise is not None:
            block = state.get("noise_block", 0) if not secure else 0
            if isinstance(block, bool) or not isinstance(block, int) or block < 0:
                raise PrivacyParameterError("noise_block must be a non-negative int.")
            self._device_noise.resume(block)
        self.steps_taken = taken
        self.loader.position = taken
        self.loader.load_state_dict(state.get("loader", {}))
        if self.clipper.layer_norms is not None:
            if norms is not None:
                self.clipper.set_layer_norms(norms)
        elif self.clipper.adaptive and c is not None:
            self.clipper.clip_norm = c


def _plain(x: Any) -> Any:
    """A generator state with its NumPy arrays as tagged lists (``torch.load`` reads it back
    with ``weights_only=True``)."""
    if isinstance(x, np.ndarray):
        return {"__array__": x.tolist(), "dtype": str(x.dtype)}
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, np.integer):
        return int(x)
    return x


def _unplain(x: Any) -> Any:
    if isinstance(x, dict):
        if set(x) == {"__array__", "dtype"}:
            return np.asarray(x["__array__"], dtype=np.dtype(x["dtype"]))
        return {k: _unplain(v) for k, v in x.items()}
    return x
