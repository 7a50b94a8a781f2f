"""Per-example norms and clipped sums of dpkit.torch against torch.func's per-example gradients."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from dpkit.errors import PrivacyParameterError  # noqa: E402
from dpkit.torch import _layers, replace_batchnorm  # noqa: E402
from dpkit.torch._clip import Clipper  # noqa: E402


class Scale(nn.Module):
    """A layer with no closed form here: per-example gradients come from torch.func."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.linspace(0.5, 1.5, n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x * self.w)


class Mixed(nn.Module):
    """Every supported layer kind: Embedding, Conv1d, Conv2d, GroupNorm, LayerNorm, Linear (2-d
    and sequence inputs), and a generic layer."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(11, 6, padding_idx=0)
        self.conv1 = nn.Conv1d(6, 5, 3, padding=1)
        self.conv2 = nn.Conv2d(2, 4, 3, stride=2, padding=1)
        self.gn = nn.GroupNorm(2, 4)
        self.seq = nn.Linear(5, 7)
        self.ln = nn.LayerNorm(7)
        self.scale = Scale(7)
        self.head = nn.Linear(7 + 4 * 16, 3)

    def forward(self, tokens: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        e = self.emb(tokens).transpose(1, 2)  # (B, 6, T)
        s = self.conv1(e).transpose(1, 2)  # (B, T, 5)
        s = self.scale(self.ln(self.seq(s))).mean(1)  # (B, 7)
        v = torch.relu(self.gn(self.conv2(image))).flatten(1)  # (B, 64)
        out: torch.Tensor = self.head(torch.cat([s, v], 1))
        return out


def _data(b: int = 6) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 11, (b, 9), generator=g)
    tokens[0, :3] = 0  # padding tokens
    tokens[1, :] = 4  # one token repeated: the ghost norm's cross terms matter
    image = torch.randn(b, 2, 8, 8, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (b,), generator=g)
    return tokens, image, y


def _reference(model: nn.Module, tokens, image, y) -> dict[str, torch.Tensor]:
    from torch.func import functional_call, grad, vmap

    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, t, im, target):
        out = functional_call(model, p, (t[None], im[None]))
        return nn.functional.cross_entropy(out, target[None])

    grads: dict[str, torch.Tensor] = vmap(grad(loss), in_dims=(None, 0, 0, 0))(
        params, tokens, image, y
    )
    return grads


def _run(model: nn.Module, clipping: str, c: float) -> tuple[Clipper, dict[str, torch.Tensor]]:
    tokens, image, y = _data()
    ref = _reference(model, tokens, image, y)
    clipper = Clipper(model, max_grad_norm=c, clipping=clipping)
    losses = nn.functional.cross_entropy(model(tokens, image), y, reduction="none")
    clipper.accumulate(losses, torch.ones(len(y), dtype=torch.bool))
    return clipper, ref


@pytest.mark.parametrize("conv_vmap_min", [64, 1])  # Conv2d by unfold, then by conv2d_weight
def test_norms_match_torch_func(conv_vmap_min: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_layers, "CONV_VMAP_MIN", conv_vmap_min)
    torch.manual_seed(0)
    model = Mixed().double()
    tokens, image, y = _data()
    ref = _reference(model, tokens, image, y)
    clipper = Clipper(model, max_grad_norm=1.0, clipping="flat")
    losses = nn.functional.cross_entropy(model(tokens, image), y, reduction="none")
    calls = list(clipper._captured())
    grads = torch.autograd.grad(losses.sum(), [c.output for c in calls])
    for call, g in zip(calls, grads, strict=True):
        call.grad = g
    clipper.busy = True  # as in accumulate(): torch.func re-runs layers without recording
    names = {id(p): n for n, p in model.named_parameters()}
    for rule in clipper.rules:
        got = rule.norms2(clipper._calls[rule.module])
        want = sum(ref[names[id(p)]].flatten(1).pow(2).sum(1) for p in rule.params)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12, msg=type(rule).__name__)
        per = rule.per_example(clipper._calls[rule.module])
        for p, g in zip(rule.params, per, strict=True):
            torch.testing.assert_close(g, ref[names[id(p)]], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(("clipping", "conv_vmap_min"), [("flat", 64), ("per_layer", 1)])
def test_clipped_sum_equals_clipping_reference(
    clipping: str, conv_vmap_min: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_layers, "CONV_VMAP_MIN", conv_vmap_min)
    torch.manual_seed(1)
    model = Mixed().double()
    c = 0.05  # below most examples' norms: clipping is active
    clipper, ref = _run(model, clipping, c)
    names = [n for n, p in model.named_parameters() if any(p is q for q in clipper.params)]
    per = {n: ref[n].flatten(1) for n in names}
    margin = 1 - 2.0**-16
    if clipping == "flat":
        total = torch.cat(list(per.values()), 1).norm(dim=1)
        assert bool((total > c).sum() >= 4)  # the bound binds for most examples
        factor = {n: (c * margin / total).clamp(max=1) for n in names}
    else:
        layer_of = {id(p): r for r in clipper.rules for p in r.params}
        by_name = dict(model.named_parameters())
        layer_norm = {}
        for r in clipper.rules:
            rn = [n for n in names if layer_of[id(by_name[n])] is r]
            layer_norm[r] = torch.cat([per[n] for n in rn], 1).norm(dim=1)
        bound = c / len(clipper.rules) ** 0.5 * margin
        factor = {n: (bound / layer_norm[layer_of[id(by_name[n])]]).clamp(max=1) for n in names}
    for n, s in zip(names, clipper.sums, strict=True):
        want = (factor[n][:, None] * per[n]).sum(0).reshape(s.shape)
        torch.testing.assert_close(s, want, rtol=1e-9, atol=1e-12)


def test_each_example_bounded_by_max_grad_norm() -> None:
    # one example at a time: the clipped sum is that example's clipped gradient
    torch.manual_seed(2)
    model = Mixed().double()
    tokens, image, y = _data(8)
    image[3] *= 1e4  # a huge gradient is clipped, not passed through
    for i in range(len(y)):
        clipper = Clipper(model, max_grad_norm=0.3, clipping="flat")
        mask = torch.zeros(len(y), dtype=torch.bool)
        mask[i] = True
        losses = nn.functional.cross_entropy(model(tokens, image), y, reduction="none")
        clipper.accumulate(losses, mask)
        norm = torch.cat([s.flatten() for s in clipper.sums]).norm()
        assert float(norm) <= 0.3
        clipper.remove()


def test_nan_example_is_dropped_and_others_kept() -> None:
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2)).double()
    x = torch.randn(5, 4, dtype=torch.float64)
    y = torch.tensor([0, 1, 0, 1, 1])
    x_bad = x.clone()
    x_bad[2] = float("nan")
    sums = []
    for data, mask in ((x, [1, 1, 0, 1, 1]), (x_bad, [1, 1, 1, 1, 1])):
        clipper = Clipper(model, max_grad_norm=1.0, clipping="flat")
        losses = nn.functional.cross_entropy(model(data), y, reduction="none")
        clipper.accumulate(losses, torch.tensor(mask, dtype=torch.bool))
        sums.append(torch.cat([s.flatten() for s in clipper.sums]))
        clipper.remove()
    torch.testing.assert_close(sums[0], sums[1])  # NaN example = left out; nothing else changed


def test_batchnorm_refused_and_replaced_keeping_features() -> None:
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Linear(6, 2))
    with pytest.raises(PrivacyParameterError, match="GroupNorm"):
        Clipper(model, max_grad_norm=1.0, clipping="flat")
    replace_batchnorm(model)
    Clipper(model, max_grad_norm=1.0, clipping="flat").remove()
    out = model[1](torch.randn(5, 6)).detach()
    assert float(out.abs().sum()) > 0  # features are normalised, not zeroed


def test_tied_weights_and_bad_losses_refused() -> None:
    a = nn.Linear(3, 3)
    b = nn.Linear(3, 3)
    b.weight = a.weight
    with pytest.raises(PrivacyParameterError, match="tied"):
        Clipper(nn.Sequential(a, b), max_grad_norm=1.0, clipping="flat")
    model = nn.Linear(3, 2)
    clipper = Clipper(model, max_grad_norm=1.0, clipping="flat")
    with pytest.raises(PrivacyParameterError, match="reduction"):
        clipper.accumulate(model(torch.randn(4, 3)).sum(), torch.ones(4, dtype=torch.bool))
    with pytest.raises(PrivacyParameterError, match="clipping"):
        Clipper(model, max_grad_norm=1.0, clipping="automatic")


def test_unit_level_norms_are_of_each_units_summed_gradient() -> None:
    # rows 3u..3u+2 are unit u's examples; the last row of unit 1 is padding
    torch.manual_seed(4)
    model = Mixed().double()
    tokens, image, y = _data(6)
    ref = _reference(model, tokens, image, y)  # per-example gradients (cross-entropy)
    rows = torch.tensor([True, True, True, True, True, False])
    clipper = Clipper(model, max_grad_norm=0.05, clipping="flat")
    losses = nn.functional.cross_entropy(model(tokens, image), y, reduction="none")
    clipper.accumulate(losses, rows, group=3)
    names = [n for n, p in model.named_parameters() if any(p is q for q in clipper.params)]
    unit = {n: (ref[n] * rows.reshape(-1, *[1] * (ref[n].dim() - 1))).reshape(2, 3, -1).sum(1)
            for n in names}  # fmt: skip
    total = torch.cat(list(unit.values()), 1).norm(dim=1)
    c = (0.05 * (1 - 2.0**-16) / total).clamp(max=1)
    for n, s in zip(names, clipper.sums, strict=True):
        torch.testing.assert_close(s.flatten(), (c[:, None] * unit[n]).sum(0), rtol=1e-9,
                                   atol=1e-12)  # fmt: skip


@pytest.mark.parametrize(
    ("shape", "ks", "dl", "pd", "st"),
    [
        ((3, 2, 7, 6), (3, 3), (1, 1), (1, 1), (1, 1)),
        ((2, 3, 9, 8), (3, 2), (1, 1), (2, 0), (2, 3)),
        ((2, 4, 1, 11), (1, 3), (1, 1), (0, 1), (1, 2)),  # a Conv1d seen as a Conv2d
        ((2, 2, 9, 9), (3, 3), (2, 1), (1, 1), (1, 1)),  # dilation: F.unfold itself
    ],
)
def test_patches_are_unfold_in_its_order(shape, ks, dl, pd, st) -> None:
    from torch.nn import functional as F

    from dpkit.torch._layers import _patches

    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    want = F.unfold(x, ks, dilation=dl, padding=pd, stride=st).transpose(1, 2)
    assert torch.equal(_patches(x, ks, dl, pd, st), want)
