"""Per-example clipping of a whole model's gradient, accumulated over physical batches.

Forward hooks record each layer call's inputs and output; :meth:`Clipper.accumulate` then asks
autograd for the gradient of the summed per-example losses with respect to those outputs only (so
no parameter gradient is computed twice), turns them into per-example norms layer by layer
(:mod:`dpkit.torch._layers`), and adds ``Σ_i c_i ∇loss_i`` with ``c_i = min(1, C/‖∇loss_i‖)`` to
running sums. Padded examples and examples whose gradient is not finite get ``c_i = 0`` and are
zeroed before any product, so a NaN in one record cannot reach the sum.

Adaptive clipping (Andrew, Thakkar, McMahan & Ramaswamy 2021, "Differentially Private Learning
with Adaptive Clipping") clips to the current norm C_t, rescales each clipped gradient by C₀/C_t
(so the sum keeps the planned sensitivity C₀ and the planned noise; the optimizer scales the noisy
sum back by C_t/C₀) and counts Σ(b_i − ½) with b_i = [‖g_i‖ ≤ C_t]; after each step the noisy
count moves C_t geometrically toward the target quantile of the norms. Per-layer adaptive clipping
keeps one norm C_{l,t} per layer, each tracking the quantile of its layer's norms from its own
noisy count, clips layer l's part to C_{l,t} (the whole to S_t = √Σ C_{l,t}², as in McMahan et al.
2018's per-layer clipping) and rescales by C₀/S_t, so the noise is again the planned one times
S_t/C₀.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from dpkit.errors import PrivacyParameterError
from dpkit.noise import gaussian
from dpkit.torch._layers import Captured, LayerRule, rule_for

__all__ = ["Clipper", "check_module"]

# Clip to C·(1 − 2⁻¹⁶): float32 norms carry a relative error far below this margin, so every
# clipped gradient's true norm stays within C.
_MARGIN = 1.0 - 2.0**-16
CLIPPINGS = ("flat", "per_layer", "adaptive", "adaptive_per_layer")
_MIXING = (nn.modules.batchnorm._BatchNorm, nn.SyncBatchNorm)


def check_module(model: nn.Module) -> list[nn.Module]:
    """Refuse models whose per-example gradients are not defined; return the layers to hook."""
    for name, m in model.named_modules():
        if isinstance(m, _MIXING) and (m.training or any(p.requires_grad for p in m.parameters())):
            raise PrivacyParameterError(
                f"layer {name or '(model)'} is a BatchNorm: it normalises with statistics of the "
                "whole batch, so one example changes every other example's gradient and "
                "per-example clipping bounds nothing. Replace it with GroupNorm or LayerNorm "
                "(dpkit.torch.replace_batchnorm(model) does it and keeps every feature), or "
                "freeze it (eval() and requires_grad_(False))."
            )
    owners: dict[int, str] = {}
    layers = []
    for name, m in model.named_modules():
        own = [p for p in m.parameters(recurse=False) if p.requires_grad]
        for p in own:
            if id(p) in owners:
                raise PrivacyParameterError(
                    f"a parameter of layer {name} is shared with layer {owners[id(p)]} (tied "
                    "weights): per-example norms of tied layers are not supported; untie them."
                )
            owners[id(p)] = name
        if own:
            layers.append(m)
    if not layers:
        raise PrivacyParameterError("the model has no trainable parameters.")
    return layers


class Clipper:
    """Clipped per-example gradient sums of ``model``'s trainable parameters.

    ``clipping="flat"`` clips each example's whole gradient to ``max_grad_norm``;
    ``"per_layer"`` clips each layer's part to ``max_grad_norm/√L`` (L layers), so the whole
    gradient's norm is again at most ``max_grad_norm``; ``"adaptive"`` clips the whole gradient
    to a norm that follows the ``target_quantile`` of the gradient norms (see the module);
    ``"adaptive_per_layer"`` clips each layer's part to its own such norm (starting at
    ``max_grad_norm/√L``), each following the quantile of that layer's norms.
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        max_grad_norm: float,
        clipping: str,
        target_quantile: float = 0.5,
        clip_learning_rate: float = 0.2,
    ) -> None:
        if clipping not in CLIPPINGS:
            raise PrivacyParameterError(
                'clipping must be "flat", "per_layer", "adaptive" or "adaptive_per_layer".'
            )
        for v, name, lo, hi in (
            (target_quantile, "target_quantile", 0.0, 1.0),
            (clip_learning_rate, "clip_learning_rate", 0.0, math.inf),
        ):
            if isinstance(v, bool) or not isinstance(v, int | float) or not lo < v < hi:
                raise PrivacyParameterError(f"{name} must be a number in ({lo:g}, {hi:g}).")
        self.adaptive = clipping in ("adaptive", "adaptive_per_layer")
        self.target_quantile = float(target_quantile)
        self.clip_learning_rate = float(clip_learning_rate)
        self.clip_norm = float(max_grad_norm)  # C_t (adaptive), starts at C₀
        self.model = model
        self.rules: list[LayerRule] = [rule_for(m) for m in check_module(model)]
        self.params = [p for r in self.rules for p in r.params]
        # per-layer adaptive: C_{l,t} from C₀/√L each, and the running counts Σ_i(b_{i,l} − ½)
        start = float(max_grad_norm) / math.sqrt(len(self.rules))
        self.layer_norms: list[float] | None = None
        if clipping == "adaptive_per_layer":
            self.layer_norms = [start] * len(self.rules)
            self.clip_norm = math.sqrt(sum(c * c for c in self.layer_norms))
        self._counts: Tensor | None = None
        self.max_grad_norm = max_grad_norm
        self.clipping = clipping
        self._calls: dict[nn.Module, list[Captured]] = {r.module: [] for r in self.rules}
        self.busy = False  # set while norms are computed: layers run again under torch.func
        self._sums: list[Tensor] | None = None  # made by the first accumulate (no zero-filling)
        self._rows_checked = False  # the probe of _check_rows ran once on a batch of two or more
        self._handles = [r.module.register_forward_hook(self._record) for r in self.rules]

    def _record(self, module: nn.Module, inputs: tuple[Any, ...], output: Any) -> None:
        if self.busy or not torch.is_grad_enabled():
            return
        if not isinstance(output, Tensor):
            raise PrivacyParameterError(
                f"layer {type(module).__name__} returns {type(output).__name__}, not a tensor: "
                "per-example gradients need layers with parameters to return one tensor."
            )
        ins = tuple(a.detach() if isinstance(a, Tensor) else a for a in inputs)
        self._calls[module].append(Captured(ins, output))

    def add_handle(self, handle: Any) -> None:
        """Remember another hook to detach in :meth:`remove`."""
        self._handles.append(handle)

    def remove(self) -> None:
        """Detach the hooks from the model."""
        for h in self._handles:
            h.remove()

    @property
    def sums(self) -> list[Tensor]:
        """Clipped gradient sums since :meth:`reset`, one per parameter (zeros if none)."""
        if self._sums is None:
            return [torch.zeros_like(p) for p in self.params]
        return self._sums

    def reset(self) -> None:
        """Forget the running sums (start of a logical batch)."""
        self._sums = None
        self._counts = None

    @property
    def unclipped(self) -> float:
        """Adaptive clipping: Σ(b_i − ½) over the logical batch so far (read from the device)."""
        if self._counts is None or self.layer_norms is not None:
            return 0.0
        below, real = (int(v) for v in self._counts.tolist())
        return below - 0.5 * real

    @property
    def layer_counts(self) -> list[float]:
        """Per-layer adaptive clipping: Σ_i(b_{i,l} − ½) per layer since :meth:`reset`."""
        if self._counts is None:
            return [0.0] * len(self.rules)
        return [float(v) for v in self._counts.tolist()]

    def set_layer_norms(self, norms: list[float]) -> None:
        """Per-layer adaptive clipping: the layers' norms C_{l,t} (and S_t from them)."""
        self.layer_norms = [float(c) for c in norms]
        self.clip_norm = math.sqrt(sum(c * c for c in self.layer_norms))

    @property
    def output_scale(self) -> float:
        """C_t/C₀: what the noisy sum of rescaled gradients is multiplied by (1 unless adaptive)."""
        return self.clip_norm / self.max_grad_norm if self.adaptive else 1.0

    def adapt(self, gen: Any, *, count_sigma: float, count_grid: int, expected: float) -> None:
        """Noise the count of unclipped gradients and move C_t toward the target quantile.

        ``b̃ = (Σ(b_i − ½) + N(0, σ_b²)) / expected + ½`` estimates the fraction unclipped (the
        expected batch size is public; the true one is not) and
        ``C_{t+1} = C_t · exp(−η (b̃ − γ))`` (Andrew et al. 2021, geometric update).
        """
        if not self.adaptive:
            return
        if self.layer_norms is not None:
            self._adapt_layers(gen, sigma=count_sigma, grid=count_grid, expected=expected)
            return
        noisy = float(gaussian(self.unclipped, count_sigma, grid=count_grid, rng=gen))
        frac = noisy / expected + 0.5
        step = max(-50.0, min(50.0, -self.clip_learning_rate * (frac - self.target_quantile)))
        # a data-independent range keeps C_t a normal positive float whatever the noise draws
        c0 = self.max_grad_norm
        self.clip_norm = min(max(self.clip_norm * math.exp(step), c0 * 1e-12), c0 * 1e12)

    def _adapt_layers(self, gen: Any, *, sigma: float, grid: int, expected: float) -> None:
        """One noisy count per layer (one Gaussian release of the L counts), one update each."""
        assert self.layer_norms is not None
        counts = np.asarray(self.layer_counts, dtype=np.float64)
        noisy = np.asarray(gaussian(counts, sigma, grid=grid, rng=gen))
        c0 = self.max_grad_norm / math.sqrt(len(self.rules))
        out = []
        for c, n in zip(self.layer_norms, noisy.tolist(), strict=True):
            frac = n / expected + 0.5
            step = max(-50.0, min(50.0, -self.clip_learning_rate * (frac - self.target_quantile)))
            out.append(min(max(c * math.exp(step), c0 * 1e-12), c0 * 1e12))
        self.set_layer_norms(out)

    def discard(self) -> None:
        """Forget recorded layer calls (a forward pass that will not be backpropagated)."""
        for calls in self._calls.values():
            calls.clear()

    def _captured(self) -> Iterator[Captured]:
        for calls in self._calls.values():
            yield from calls

    def accumulate(self, losses: Tensor, mask: Tensor, *, group: int = 1) -> None:
        """Add the clipped per-example gradients of ``losses`` (shape (B,)) where ``mask``.

        ``group`` = k > 1: consecutive blocks of k examples are one privacy unit's; each unit's
        summed gradient is clipped (user-level DP-SGD), masked rows contribute nothing.
        """
        if losses.dim() == 1 and losses.shape[0] % group:
            self.discard()
            raise PrivacyParameterError("the batch must hold whole units of examples.")
        if losses.dim() != 1 or losses.shape[0] != mask.shape[0]:
            self.discard()
            raise PrivacyParameterError(
                "losses must be one loss per example of the physical batch (shape (B,)): use "
                'reduction="none" in the loss function.'
            )
        calls = list(self._captured())
        if not calls:
            raise PrivacyParameterError(
                "no forward pass of the model was recorded before backward."
            )
        try:
            outputs = [c.output for c in calls]
            self._check_rows(losses, outputs)
            grads = torch.autograd.grad(losses.sum(), outputs, allow_unused=True)
            for call, g in zip(calls, grads, strict=True):
                call.grad = torch.zeros_like(call.output) if g is None else g.detach()
            self.busy = True
            with torch.no_grad():
                self._add(mask.to(torch.bool), group)
        finally:
            self.busy = False
            self.discard()

    def _check_rows(self, losses: Tensor, outputs: list[Tensor]) -> None:
        """Refuse layer calls whose dim 0 is not the example (sequence-first layouts).

        Each rule clips row i of every layer call as example i's: with (T, B, …) inputs a row is
        a position summed over all examples, and one example would move every row. Once per run,
        on a batch of two or more, example r's loss must have a zero gradient on every other
        row of every layer's output (non-finite entries, 0·NaN from another example, are
        ignored so that the check cannot depend on a record's value).
        """
        b = losses.shape[0]
        for out in outputs:
            if out.dim() == 0 or out.shape[0] != b:
                raise PrivacyParameterError(
                    "a layer's output does not have one row per example (dim 0 of its shape is "
                    "not the batch): use batch-first layouts (batch_first=True)."
                )
        if self._rows_checked or b < 2:
            return
        finite = torch.isfinite(losses.detach())
        if not bool(finite.any()):
            return
        r = int(torch.argmax(finite.to(torch.int8)))
        probe = torch.autograd.grad(losses[r], outputs, retain_graph=True, allow_unused=True)
        for g in probe:
            if g is None:
                continue
            other = torch.cat([g[:r], g[r + 1 :]])
            if bool(((other != 0) & torch.isfinite(other)).any()):
                raise PrivacyParameterError(
                    "one example's loss depends on another example's row of a layer's output: "
                    "the model mixes examples (a sequence-first layout, or batch statistics), "
                    "so per-example clipping bounds nothing. Use batch-first layouts."
                )
        self._rows_checked = True

    def _add(self, rows: Tensor, group: int) -> None:
        layer_calls = [self._calls[r.module] for r in self.rules]
        if group > 1:  # padding rows inside a unit: zero them before the unit's sum
            if _may_drop(rows):
                _zero_dropped(layer_calls, rows)
            mask = rows.reshape(-1, group).any(1)
        else:
            mask = rows
        # every layer's per-example squared norms in one (L, B) tensor, converted once; the
        # clipping below is a few operations on it whatever the number of layers
        norms2 = torch.stack(
            [r.norms2(c, group) for r, c in zip(self.rules, layer_calls, strict=True)]
        ).to(torch.float64)
        if self.layer_norms is not None:
            f = self._adaptive_layer_factors(norms2, mask)
            keep = mask & _finite(norms2).all(0)
        elif self.clipping != "per_layer":
            norm = self.clip_norm if self.adaptive else self.max_grad_norm
            bound = norm * _MARGIN
            total = norms2.sum(0).sqrt()
            ok = mask & (total < math.inf)  # total ≥ 0 or NaN: finite exactly when below inf
            c = torch.where(ok, (bound / total.clamp_min(1e-300)).clamp(max=1.0), 0.0)
            if self.adaptive:
                # counted on the norms' device, read once per step (no host wait per batch)
                counts = torch.stack(((ok & (total <= norm)).sum(), mask.sum()))
                self._counts = counts if self._counts is None else self._counts + counts
                c = c * (self.max_grad_norm / norm)  # sensitivity C₀ as planned
            f = c[None]
            keep = ok
        else:
            bound = self.max_grad_norm / math.sqrt(len(self.rules)) * _MARGIN
            ok = mask & _finite(norms2).all(0)
            f = torch.where(ok, (bound / norms2.sqrt().clamp_min(1e-300)).clamp(max=1.0), 0.0)
            keep = ok
        if group > 1:
            keep = keep.repeat_interleave(group)
            f = f.repeat_interleave(group, dim=1)
        dtypes = {p.dtype for p in self.params}
        dtypes |= {c.grad.dtype for calls in layer_calls for c in calls if c.grad is not None}
        if len(dtypes) == 1:  # each layer's rule would convert to it: once here instead
            f = f.to(dtypes.pop())
        factors = list(f.unbind(0)) if f.shape[0] > 1 else [f[0]] * len(self.rules)
        if _may_drop(keep):
            _zero_dropped(layer_calls, keep)
        new = [
            g.reshape(p.shape)
            for rule, calls, c in zip(self.rules, layer_calls, factors, strict=True)
            for g, p in zip(rule.clipped_sum(calls, c), rule.params, strict=True)
        ]
        if self._sums is None:
            self._sums = new
        else:  # the sums are this clipper's own tensors: added in place, one fused op
            torch._foreach_add_(self._sums, new)

    def _adaptive_layer_factors(self, norms2: Tensor, mask: Tensor) -> Tensor:
        """Clip layer l to C_{l,t}, rescale by C₀/S_t; count the unclipped per layer."""
        assert self.layer_norms is not None
        bounds = torch.tensor(self.layer_norms, dtype=torch.float64, device=norms2.device)
        n = norms2.sqrt()
        ok = mask & _finite(norms2).all(0)
        below = (ok & (n <= bounds[:, None])).sum(1).to(torch.float64)
        counts = below - 0.5 * mask.sum().to(torch.float64)  # on the device: no host wait
        self._counts = counts if self._counts is None else self._counts + counts
        rescale = self.max_grad_norm / self.clip_norm  # sensitivity C₀ as planned
        f = (bounds[:, None] * _MARGIN / n.clamp_min(1e-300)).clamp(max=1.0) * rescale
        return torch.where(ok, f, 0.0)


def _finite(x: Tensor) -> Tensor:
    """``isfinite`` in two operations (``|x| < inf``) rather than its four."""
    return x.abs() < math.inf


ZERO_ON_DEVICE = True
"""On a device, zero the dropped rows without first asking the host whether any is dropped."""


def _may_drop(keep: Tensor) -> bool:
    """Whether rows may have to be zeroed. On the CPU, only if one is dropped; on a device, always:
    reading ``keep.all()`` back would stall the host once per physical batch, and zeroing (one
    ``where`` per tensor, no host wait) gives the same sums when nothing is dropped."""
    return (ZERO_ON_DEVICE and keep.device.type != "cpu") or not bool(keep.all())


def _zero_dropped(layer_calls: list[list[Captured]], keep: Tensor) -> None:
    """Zero inputs and output gradients of dropped examples (0·NaN would be NaN)."""
    for calls in layer_calls:
        for call in calls:
            call.inputs = tuple(_where(keep, a) for a in call.inputs)
            assert call.grad is not None
            call.grad = _where(keep, call.grad)
            if call.per is not None:  # per-example gradients kept from the norms
                call.per = [_where(keep, g) for g in call.per]
            if call.view is not None:  # a convolution's patches: zeroed, not made again
                call.view.inputs = tuple(_where(keep, a) for a in call.view.inputs)
                call.view.grad = _where(keep, call.view.grad)


def _where(keep: Tensor, x: Any) -> Any:
    if not isinstance(x, Tensor) or not x.is_floating_point():
        return x
    k = keep.reshape(-1, *([1] * (x.dim() - 1)))
    return torch.where(k, x, 0.0)  # a Python zero: no CPU tensor to copy to the device
