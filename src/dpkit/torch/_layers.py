"""Per-example gradient norms and clipped gradient sums, one layer at a time.

For a layer whose output is ``s = a Wᵀ`` the gradient of example i's loss with respect to ``W``
is ``Σ_t g_{it} a_{it}ᵀ`` (t runs over positions: tokens, pixels), with ``a`` the layer's input
and ``g = ∂loss/∂s``. Both are captured during the forward and backward passes, so that

* the per-example squared norm is ``Σ_{t,s} (a_t·a_s)(g_t·g_s)`` ("ghost" norm, Goodfellow 2015;
  Li et al. 2022), or ``‖Σ_t g_t a_tᵀ‖²`` by materialising the gradient, whichever costs less
  (T² (d+p) against T d p multiply-adds: Bu et al. 2023, "book-keeping");
* the clipped sum ``Σ_i c_i Σ_t g_{it} a_{it}ᵀ`` is one matrix product, ``(c·g)ᵀ a``, with no
  second backward pass and no per-example gradient kept (Bu et al. 2023).

Linear, Embedding, Conv1d/Conv2d (through their patches), LayerNorm and GroupNorm have closed forms
here; any other layer with parameters gets per-example gradients from ``torch.func`` (``vmap`` of
a vector-Jacobian product on that layer alone), which works for every layer whose output for one
example depends on that example only. BatchNorm does not (it mixes examples) and is refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

__all__ = ["Captured", "LayerRule", "rule_for"]

CONV_VMAP_MIN = 64
"""Conv2d layers with Cin·k² at least this use :class:`ConvGradRule`, smaller ones ``unfold``
(measured on CPU: unfold wins for a 3-channel input layer, loses 10× at 32 channels)."""


class Captured:
    """One call of a layer in a forward pass: its inputs and output (the graph's node)."""

    __slots__ = ("grad", "inputs", "output", "per", "view")

    def __init__(self, inputs: tuple[Any, ...], output: Tensor) -> None:
        self.inputs = inputs
        self.output = output
        self.grad: Tensor | None = None
        self.view: Captured | None = None  # a convolution's patches, unfolded once
        # the layer's per-example gradients, kept from the norms for the clipped sum
        self.per: list[Tensor] | None = None


class LayerRule:
    """How to get per-example squared norms and clipped sums for one layer's parameters."""

    def __init__(self, module: nn.Module) -> None:
        # Any: torch types a module's attributes as Tensor | Module; each rule knows its layer
        self.module: Any = module
        self.params = [p for p in module.parameters(recurse=False) if p.requires_grad]

    def norms2(self, calls: list[Captured], group: int = 1) -> Tensor:
        """Per-example squared ℓ2 norm of this layer's whole gradient, shape (B,).

        With ``group`` = k > 1, rows k·u … k·u + k − 1 are one privacy unit's examples and the
        norms are of each unit's summed gradient, shape (B/k,).
        """
        grads = self.per_example(calls)
        if type(self).clipped_sum is LayerRule.clipped_sum:  # used again there: not remade
            calls[0].per = grads
        return sum(_sq(_grouped_sum(g, group)) for g in grads)  # type: ignore[return-value]

    def per_example(self, calls: list[Captured]) -> list[Tensor]:
        """Per-example gradients, one (B, *param.shape) tensor per parameter."""
        out: list[Tensor] | None = None
        for call in calls:
            grads = self._per_example_call(call)
            out = grads if out is None else [a + b for a, b in zip(out, grads, strict=True)]
        assert out is not None
        return out

    def _per_example_call(self, call: Captured) -> list[Tensor]:
        return _functional_per_example(self.module, self.params, call)

    def clipped_sum(self, calls: list[Captured], c: Tensor) -> list[Tensor]:
        """``Σ_i c_i ∇_θ loss_i`` for each parameter θ of the layer."""
        kept = calls[0].per
        grads = kept if kept is not None else self.per_example(calls)
        return [torch.einsum("b,b...->...", c.to(g.dtype), g) for g in grads]


def _grouped_sum(g: Tensor, group: int) -> Tensor:
    """Sum consecutive ``group`` rows: per-example values → per-unit values."""
    return g if group == 1 else g.reshape(-1, group, *g.shape[1:]).sum(1)


def _units(x: Tensor, group: int) -> Tensor:
    """(B, T, d) → (B/k, k·T, d): a unit's examples as one long sequence."""
    return x if group == 1 else x.reshape(-1, group * x.shape[1], x.shape[2])


def _sq(g: Tensor) -> Tensor:
    flat = g.reshape(g.shape[0], -1)
    return torch.einsum("bi,bi->b", flat, flat)


def _functional_per_example(
    module: nn.Module, params: Sequence[Tensor], call: Captured
) -> list[Tensor]:
    from torch.func import functional_call, vjp, vmap

    names = {id(p): n for n, p in module.named_parameters(recurse=False)}
    keys = [names[id(p)] for p in params]
    tensors = [p.detach() for p in params]
    args = call.inputs
    batched = tuple(0 if isinstance(a, Tensor) else None for a in args)
    assert call.grad is not None

    def one(x: tuple[Any, ...], g: Tensor) -> tuple[Tensor, ...]:
        def f(*ps: Tensor) -> Tensor:
            xs = tuple(a.unsqueeze(0) if isinstance(a, Tensor) else a for a in x)
            out: Tensor = functional_call(module, dict(zip(keys, ps, strict=True)), xs)
            return out

        pull = vjp(f, *tensors)[1]
        result: tuple[Tensor, ...] = pull(g.unsqueeze(0))
        return result

    per: tuple[Tensor, ...] = vmap(one, in_dims=(batched, 0))(args, call.grad)
    return list(per)


def _flat3(x: Tensor) -> Tensor:
    """(B, ..., d) → (B, T, d)."""
    return x.reshape(x.shape[0], -1, x.shape[-1])


def _ghost_or_dense(a: Tensor, g: Tensor) -> Tensor:
    """‖Σ_t g_t a_tᵀ‖² per example for a (B, T, d) and g (B, T, p)."""
    _, t, d = a.shape
    p = g.shape[-1]
    if t == 1:
        return _sq(a[:, 0]) * _sq(g[:, 0])
    if t * t * (d + p) < t * d * p:
        return ((a @ a.transpose(1, 2)) * (g @ g.transpose(1, 2))).sum((1, 2))
    return _sq(torch.einsum("btp,btd->bpd", g, a))


class LinearRule(LayerRule):
    """``nn.Linear`` on inputs of shape (B, ..., d)."""

    def norms2(self, calls: list[Captured], group: int = 1) -> Tensor:
        if len(calls) > 1:
            return super().norms2(calls, group)
        call = calls[0]
        assert call.grad is not None
        a, g = _units(_flat3(call.inputs[0]), group), _units(_flat3(call.grad), group)
        total = _ghost_or_dense(a, g) if self.module.weight.requires_grad else 0
        if self.module.bias is not None and self.module.bias.requires_grad:
            total = total + _sq(g.sum(1))
        return total  # type: ignore[return-value]

    def _per_example_call(self, call: Captured) -> list[Tensor]:
        assert call.grad is not None
        a, g = _flat3(call.inputs[0]), _flat3(call.grad)
        out = []
        if self.module.weight.requires_grad:
            out.append(torch.einsum("btp,btd->bpd", g, a))
        if self.module.bias is not None and self.module.bias.requires_grad:
            out.append(g.sum(1))
        return out

    def clipped_sum(self, calls: list[Captured], c: Tensor) -> list[Tensor]:
        w: Tensor | None = None
        b: Tensor | None = None
        for call in calls:
            assert call.grad is not None
            a, g = _flat3(call.inputs[0]), _flat3(call.grad)
            gc = g * c.to(g.dtype)[:, None, None]
            if self.module.weight.requires_grad:
                # (c·g)ᵀ a: the clipped sum in one product, the cost of the usual weight gradient
                wi = gc.reshape(-1, gc.shape[-1]).T @ a.reshape(-1, a.shape[-1])
                w = wi if w is None else w + wi
            if self.module.bias is not None and self.module.bias.requires_grad:
                bi = gc.sum((0, 1))
                b = bi if b is None else b + bi
        return [x for x in (w, b) if x is not None]


class EmbeddingRule(LayerRule):
    """``nn.Embedding`` (dense gradients, no ``max_norm``)."""

    def _rows(self, call: Captured) -> tuple[Tensor, Tensor]:
        assert call.grad is not None
        idx = call.inputs[0].reshape(call.inputs[0].shape[0], -1)
        g = call.grad.reshape(idx.shape[0], idx.shape[1], -1)
        pad = self.module.padding_idx
        if pad is not None:  # the padding row never gets a gradient
            g = g * (idx != pad).to(g.dtype)[..., None]
        return idx, g

    def norms2(self, calls: list[Captured], group: int = 1) -> Tensor:
        if len(calls) > 1:
            return super().norms2(calls, group)
        idx, g = self._rows(calls[0])
        if group > 1:
            idx = idx.reshape(-1, group * idx.shape[1])
            g = _units(g, group)
        same = (idx[:, :, None] == idx[:, None, :]).to(g.dtype)
        return (same * (g @ g.transpose(1, 2))).sum((1, 2))

    def _per_example_call(self, call: Captured) -> list[Tensor]:
        idx, g = self._rows(call)
        w = self.module.weight
        out = g.new_zeros((idx.shape[0], *w.shape))
        out.scatter_add_(1, idx[..., None].expand(-1, -1, w.shape[1]), g)
        return [out]

    def clipped_sum(self, calls: list[Captured], c: Tensor) -> list[Tensor]:
        w = torch.zeros_like(self.module.weight)
        for call in calls:
            idx, g = self._rows(call)
            gc = g * c.to(g.dtype)[:, None, None]
            w.index_add_(0, idx.reshape(-1), gc.reshape(-1, gc.shape[-1]))
        return [w]


class ConvRule(LinearRule):
    """``nn.Conv1d``/``nn.Conv2d`` with ``groups=1`` and zero padding, as a Linear on patches."""

    def _patches(self, call: Captured) -> tuple[Tensor, Tensor]:
        m = self.module
        x = call.inputs[0]
        assert call.grad is not None
        g = call.grad
        if isinstance(m, nn.Conv1d):
            x, g = x.unsqueeze(2), g.unsqueeze(2)
            ks, st, pd, dl = (1, *m.kernel_size), (1, *m.stride), (0, *m.padding), (1, *m.dilation)
        else:
            ks, st, pd, dl = m.kernel_size, m.stride, m.padding, m.dilation
        return _patches(x, ks, dl, pd, st), g.reshape(g.shape[0], g.shape[1], -1).transpose(1, 2)

    def _views(self, call: Captured) -> Captured:
        if call.view is None:
            a, g = self._patches(call)
            call.view = Captured((a,), call.output)
            call.view.grad = g
        return call.view

    def norms2(self, calls: list[Captured], group: int = 1) -> Tensor:
        return super().norms2([self._views(c) for c in calls], group)

    def per_example(self, calls: list[Captured]) -> list[Tensor]:
        out = super().per_example([self._views(c) for c in calls])
        if self.module.weight.requires_grad:
            out[0] = out[0].reshape(out[0].shape[0], *self.module.weight.shape)
        return out

    def clipped_sum(self, calls: list[Captured], c: Tensor) -> list[Tensor]:
        out = super().clipped_sum([self._views(x) for x in calls], c)
        if self.module.weight.requires_grad:
            out[0] = out[0].reshape(self.module.weight.shape)
        return out

    def _per_example_call(self, call: Captured) -> list[Tensor]:
        return LinearRule._per_example_call(self, call)


def _patches(
    x: Tensor,
    ks: Sequence[int],
    dl: Sequence[int],
    pd: Sequence[int],
    st: Sequence[int],
) -> Tensor:
    """The (B, L, Cin·kh·kw) patches of a (B, Cin, H, W) input, in ``F.unfold``'s order.

    Without dilation, one strided view of the padded input and one copy: ``F.unfold`` loops
    over the examples on a GPU (a kernel launch each) and was 10× slower on the CPU as well.
    """
    if tuple(dl) != (1, 1):
        return F.unfold(
            x, tuple(ks), dilation=tuple(dl), padding=tuple(pd), stride=tuple(st)
        ).transpose(1, 2)
    x = F.pad(x, (pd[1], pd[1], pd[0], pd[0]))
    v = x.unfold(2, ks[0], st[0]).unfold(3, ks[1], st[1])  # (B, Cin, Lh, Lw, kh, kw)
    b, c, lh, lw, kh, kw = v.shape
    return v.permute(0, 2, 3, 1, 4, 5).reshape(b, lh * lw, c * kh * kw)


class ConvGradRule(LayerRule):
    """``nn.Conv2d`` with many input channels: per-example weight gradients by a batched
    convolution backward (``vmap`` of ``conv2d_weight``), on CPU several times faster than
    ``unfold`` once Cin·k² is large; the clipped sum is one ``conv2d_weight`` of ``c·g``."""

    def _weight_grad(self, x: Tensor, g: Tensor) -> Tensor:
        m = self.module
        from torch.nn.grad import conv2d_weight

        out: Tensor = conv2d_weight(  # type: ignore[no-untyped-call]
            x, m.weight.shape, g, stride=m.stride, padding=m.padding, dilation=m.dilation
        )
        return out

    def _per_example_call(self, call: Captured) -> list[Tensor]:
        from torch.func import vmap

        assert call.grad is not None
        x, g = call.inputs[0], call.grad
        out = []
        if self.module.weight.requires_grad:
            out.append(vmap(lambda xi, gi: self._weight_grad(xi[None], gi[None])[None])(x, g)[:, 0])
        if self.module.bias is not None and self.module.bias.requires_grad:
            out.append(g.sum((2, 3)))
        return out

    def clipped_sum(self, calls: list[Captured], c: Tensor) -> list[Tensor]:
        w: Tensor | None = None
        b: Tensor | None = None
        for call in calls:
            assert call.grad is not None
            gc = call.grad * c.to(call.grad.dtype)[:, None, None, None]
            if self.module.weight.requires_grad:
                wi = self._weight_grad(call.inputs[0], gc)
                w = wi if w is None else w + wi
            if self.module.bias is not None and self.module.bias.requires_grad:
                bi = gc.sum((0, 2, 3))
                b = bi if b is None else b + bi
        return [x for x in (w, b) if x is not None]


class NormRule(LayerRule):
    """``nn.LayerNorm`` and ``nn.GroupNorm``: per-example gradients are cheap to materialise."""

    def _per_example_call(self, call: Captured) -> list[Tensor]:
        m = self.module
        x = call.inputs[0]
        assert call.grad is not None
        g = call.grad
        with torch.no_grad():
            if isinstance(m, nn.GroupNorm):
                xhat = F.group_norm(x, m.num_groups, None, None, m.eps)
                dims = tuple(range(2, x.dim()))
                # (B, C) inputs (a replaced BatchNorm1d): sum over no dim (sum(()) sums all)
                gw, gb = ((xhat * g).sum(dims), g.sum(dims)) if dims else (xhat * g, g)
            else:
                shape = tuple(m.normalized_shape)
                xhat = F.layer_norm(x, shape, None, None, m.eps)
                dims = tuple(range(1, x.dim() - len(shape)))
                gw = (xhat * g).sum(dims) if dims else xhat * g
                gb = g.sum(dims) if dims else g
        out = []
        if m.weight is not None and m.weight.requires_grad:
            out.append(gw)
        if m.bias is not None and m.bias.requires_grad:
            out.append(gb)
        return out


def _conv_ok(m: nn.Module) -> bool:
    return (
        isinstance(m, nn.Conv1d | nn.Conv2d)
        and m.groups == 1
        and m.padding_mode == "zeros"
        and not isinstance(m.padding, str)
    )


def rule_for(module: nn.Module) -> LayerRule:
    """The fastest correct rule for a layer with trainable parameters of its own."""
    if isinstance(module, nn.Linear):
        return LinearRule(module)
    if isinstance(module, nn.Embedding) and module.max_norm is None and not module.sparse:
        return EmbeddingRule(module)
    if _conv_ok(module):
        m: Any = module
        if isinstance(m, nn.Conv2d) and m.in_channels * math.prod(m.kernel_size) >= CONV_VMAP_MIN:
            return ConvGradRule(module)
        return ConvRule(module)
    if isinstance(module, nn.LayerNorm | nn.GroupNorm):
        return NormRule(module)
    return LayerRule(module)


def parameter_count(rules: list[LayerRule]) -> int:
    """Number of trainable coordinates (the dimension of the noisy sum)."""
    return sum(math.prod(p.shape) for r in rules for p in r.params)
