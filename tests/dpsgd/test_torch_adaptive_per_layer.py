"""Per-layer adaptive clipping: one norm per layer tracking its quantile, counts paid from z."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from dpkit.errors import PrivacyParameterError
from dpkit.random import seeded
from dpkit.torch import make_private, plan_training
from dpkit.torch._clip import Clipper

FAST = {
    "n_samples": 1000,
    "batch_size": 50,
    "epochs": 2,
    "max_grad_norm": 1.0,
    "dimension": 1000,
    "accounting": "rdp",
}


@pytest.mark.parametrize(("z", "sigma_b", "layers"), [(1.0, 5.0, 4), (0.8, 12.8, 3), (2.0, 9.0, 7)])
def test_layer_counts_are_paid_from_the_declared_multiplier(z, sigma_b, layers):
    # L counts of sensitivity ½ each: ℓ2 sensitivity ½√L, so the gradient sum gets the
    # multiplier (z⁻² − L·(2σ_b)⁻²)^(−1/2) and sum and counts together cost the plain run's z
    plain = plan_training(**FAST, delta=1e-5, noise_multiplier=z)
    adaptive = plan_training(
        **FAST, delta=1e-5, noise_multiplier=z, count_noise=sigma_b, count_dimension=layers
    )
    z_grad = (z**-2 - layers * (2 * sigma_b) ** -2) ** -0.5
    assert adaptive.sigma / adaptive.sensitivity == pytest.approx(z_grad, rel=1e-6)
    assert adaptive.epsilon() == pytest.approx(plain.epsilon(), rel=1e-6)
    assert adaptive.epsilon() >= plain.epsilon() * (1 - 1e-9)  # rounded on the safe side
    one = plan_training(**FAST, delta=1e-5, noise_multiplier=z, count_noise=sigma_b)
    assert one.sigma < adaptive.sigma  # more counts leave less of z to the gradients


def test_too_many_counts_for_their_noise_are_refused():
    # 2σ_b = 4 > z = 2, but 2σ_b/√L = 4/√5 < 2: the counts alone would spend the budget
    plan_training(**FAST, delta=1e-5, noise_multiplier=2.0, count_noise=2.0)
    with pytest.raises(PrivacyParameterError, match="count_noise"):
        plan_training(**FAST, delta=1e-5, noise_multiplier=2.0, count_noise=2.0, count_dimension=5)
    with pytest.raises(PrivacyParameterError, match="count_dimension"):
        plan_training(**FAST, delta=1e-5, noise_multiplier=2.0, count_noise=2.0, count_dimension=0)


class _TwoLayers(nn.Module):
    """f(x) = a·x₀ + b·x₁ with a and b in separate layers."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(1, 1, bias=False)
        self.b = nn.Linear(1, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a(x[:, :1]) + self.b(x[:, 1:])


def _data(n: int) -> tuple[TensorDataset, np.ndarray]:
    gen = np.random.default_rng(0)
    x = gen.standard_normal((n, 2)) * np.array([1.0, 10.0])  # layer b's norms 10× layer a's
    y = 3 * gen.standard_normal((n, 1))
    # with both weights held at 0, example i's gradient in layer l has norm |2·y_i·x_{i,l}|
    norms = (2 * np.abs(y) * np.abs(x)).T
    return TensorDataset(torch.tensor(x, dtype=torch.float32), torch.tensor(y).float()), norms


def _model() -> nn.Module:
    model = _TwoLayers()
    with torch.no_grad():
        model.a.weight.zero_()
        model.b.weight.zero_()
    return model


@pytest.mark.parametrize("quantile", [0.3, 0.7])
def test_each_layer_norm_converges_to_its_own_quantile(quantile):
    data, norms = _data(1000)
    model = _model()
    run = make_private(
        model, torch.optim.SGD(model.parameters(), lr=0.0), data, n_samples=1000,
        batch_size=100, epochs=4, max_grad_norm=0.1, delta=1e-5, noise_multiplier=1.0,
        clipping="adaptive_per_layer", target_quantile=quantile, clip_learning_rate=1.0,
        rng=seeded(1),
    )  # fmt: skip
    assert run.plan.count_sigma == pytest.approx(100 / 20 * math.sqrt(2))  # √L · b/20
    seen: list[list[float]] = []
    run.fit(
        loss_fn=lambda m, b: ((m(b[0]) - b[1]) ** 2).ravel(),
        callback=lambda s: seen.append(list(run.optimizer.clipper.layer_norms)),
    )
    late = np.mean(seen[-15:], axis=0)  # 40 steps from 0.1/√2 each; the last 15 hover
    assert late[1] > 5 * late[0]  # each layer found its own scale
    for layer in range(2):
        # the fraction of the layer's norms below its tracked value is the target, up to the
        # count's noise (σ_b ≈ 7 on 100 examples: ±0.07 per step) and the steps' jitter
        assert abs(float(np.mean(norms[layer] <= late[layer])) - quantile) < 0.1
    c = run.optimizer.clipper
    assert c.clip_norm == pytest.approx(math.hypot(*c.layer_norms))


def test_rescaled_sum_is_each_layer_clipped_at_its_norm():
    torch.manual_seed(0)
    model = _TwoLayers()
    x, y = torch.randn(8, 2) * 3, torch.randn(8, 1)
    clipper = Clipper(model, max_grad_norm=1.0, clipping="adaptive_per_layer")
    assert clipper.layer_norms == [1 / math.sqrt(2)] * 2
    clipper.set_layer_norms([0.5, 4.0])
    clipper.accumulate(((model(x) - y) ** 2).ravel(), torch.ones(8, dtype=torch.bool))
    for k, (layer, bound) in enumerate(((model.a, 0.5), (model.b, 4.0))):
        got = clipper.sums[k] * clipper.output_scale
        g = torch.stack(
            [torch.autograd.grad(((model(x[i : i + 1]) - y[i]) ** 2).sum(), layer.weight)[0]
             for i in range(8)]
        )  # fmt: skip
        norm = g.flatten(1).norm(dim=1)
        want = (g * (bound * (1 - 2**-16) / norm).clamp(max=1).reshape(-1, 1, 1)).sum(0)
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-6)
        assert clipper.layer_counts[k] == float((norm <= bound).sum()) - 4  # Σ(b_i − ½)
    assert math.isclose(clipper.output_scale, math.hypot(0.5, 4.0))


def test_checkpoint_carries_the_layer_norms():
    data, _ = _data(200)
    model = _model()
    run = make_private(
        model, torch.optim.SGD(model.parameters(), lr=0.0), data, n_samples=200,
        batch_size=20, epochs=1, max_grad_norm=0.5, delta=1e-5, noise_multiplier=1.0,
        clipping="adaptive_per_layer", rng=seeded(2),
    )  # fmt: skip
    run.fit(loss_fn=lambda m, b: ((m(b[0]) - b[1]) ** 2).ravel(), steps=3)
    state = run.optimizer.state_dict()
    c = run.optimizer.clipper
    assert state["clip_norms"] == c.layer_norms and c.layer_norms[0] != c.layer_norms[1]
    c.set_layer_norms([0.1, 0.1])
    run.optimizer.load_state_dict(state)
    assert c.layer_norms == state["clip_norms"]
    assert c.clip_norm == pytest.approx(math.hypot(*state["clip_norms"]))
    with pytest.raises(PrivacyParameterError, match="clip_norms"):
        run.optimizer.load_state_dict({**state, "clip_norms": [1.0]})
