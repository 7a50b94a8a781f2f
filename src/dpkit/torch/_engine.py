"""``make_private``: a model, an optimizer and data in; their private versions and the plan out."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor, nn

from dpkit.accounting._charge import SupportsCharge, charge_release
from dpkit.errors import PrivacyParameterError
from dpkit.random import RNGLike, as_generator
from dpkit.torch._clip import Clipper
from dpkit.torch._layers import parameter_count
from dpkit.torch._optimizer import PrivateOptimizer
from dpkit.torch._plan import TrainingPlan, plan_training
from dpkit.torch._sampling import PrivateLoader

__all__ = ["PrivateTraining", "make_private"]

LossFn = Callable[[nn.Module, tuple[Tensor, ...]], Tensor]


class PrivateTraining:
    """The private model, optimizer and loader of one planned run (unpacks as that triple).

    Attributes
    ----------
    model : torch.nn.Module
        The model itself (hooked: every forward pass with gradients enabled is recorded).
    optimizer : PrivateOptimizer
    loader : PrivateLoader
        Iterate it for the logical batches of one epoch (one DP-SGD step each).
    plan : TrainingPlan
        Noise, sampling and the privacy event of the whole run (paid for when made).
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: PrivateOptimizer,
        loader: PrivateLoader,
        plan: TrainingPlan,
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.loader = loader
        self.plan = plan

    def __iter__(self) -> Iterator[Any]:
        return iter((self.model, self.optimizer, self.loader))

    def epsilon(self, delta: float | None = None) -> float:
        """ε spent by the steps taken so far (dpkit's accountant on the sampler's event)."""
        return self.plan.epsilon_after(self.optimizer.steps_taken, delta=delta)

    def fit(
        self,
        criterion: Callable[[Tensor, Tensor], Tensor] | None = None,
        *,
        loss_fn: LossFn | None = None,
        steps: int | None = None,
        callback: Callable[[int], None] | None = None,
    ) -> PrivateTraining:
        """Run the planned steps (or ``steps`` more of them): the common training loop.

        ``criterion(model(x), y)`` must return one loss per example (``reduction="none"``) for
        batches ``(x, y)``; or give ``loss_fn(model, batch)`` for other batch layouts.
        ``callback(step)`` is called after each step. Batches are moved to the parameters'
        device (a no-op for data already there: keep a ``TensorDataset`` on the GPU to avoid
        the copies).
        """
        if (criterion is None) == (loss_fn is None):
            raise PrivacyParameterError("give exactly one of criterion and loss_fn.")
        if loss_fn is None:
            crit = criterion
            assert crit is not None

            def loss_fn(model: nn.Module, batch: tuple[Tensor, ...]) -> Tensor:
                x, y = batch
                return crit(model(x), y)

        left = self.plan.steps - self.optimizer.steps_taken
        todo = left if steps is None else min(int(steps), left)
        self.model.train()
        device = self.optimizer.device
        while todo > 0:
            for batch in self.loader:
                self.optimizer.zero_grad()
                for physical in batch:
                    moved = tuple(_to(t, device) for t in physical)
                    self.optimizer.backward(loss_fn(self.model, moved))
                self.optimizer.step()
                todo -= 1
                if callback is not None:
                    callback(self.optimizer.steps_taken)
                if todo == 0:
                    break
        return self


def _to(x: Any, device: torch.device) -> Any:
    return x.to(device, non_blocking=True) if isinstance(x, Tensor) else x


def _dataset(data: Any) -> tuple[Any, int | None, Any]:
    from torch.utils.data import DataLoader

    if isinstance(data, DataLoader):
        return data.dataset, data.batch_size, data.collate_fn
    if not hasattr(data, "__getitem__") or not hasattr(data, "__len__"):
        raise PrivacyParameterError(
            "data must be a map-style dataset (with __getitem__ and __len__) or a DataLoader."
        )
    return data, None, None


def make_private(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    data: Any,
    *,
    n_samples: int,
    epochs: float,
    max_grad_norm: float,
    delta: float,
    noise_multiplier: float | None = None,
    target_epsilon: float | None = None,
    batch_size: int | None = None,
    physical_batch_size: int | None = None,
    sampling: str = "poisson",
    clipping: str = "flat",
    target_quantile: float = 0.5,
    clip_learning_rate: float = 0.2,
    count_noise: float | None = None,
    units: Any = None,
    max_examples_per_unit: int | None = None,
    accountant: SupportsCharge | None = None,
    accounting: str = "auto",
    rng: RNGLike = None,
    noise: str = "auto",
) -> PrivateTraining:
    """Make a model, its optimizer and its data private: DP-SGD (Abadi et al. 2016) done exactly.

    Parameters
    ----------
    model, optimizer
        The model and an optimizer over its parameters. BatchNorm layers are refused (see
        :func:`replace_batchnorm`).
    data : Dataset or DataLoader
        A map-style dataset (a ``TensorDataset`` is gathered fastest) or a ``DataLoader`` whose
        dataset, batch size and collate function are used (its sampler is not: sampling is
        dpkit's).
    n_samples : int
        The **declared, public** dataset size. The sampling rate ``q = batch_size / n_samples``,
        the number of steps and the divisor of the noisy sum come from it, never from
        ``len(data)`` (the true size is private under add/remove).
    epochs : float
        Planned passes over ``n_samples`` examples: ``ceil(epochs · n_samples / batch_size)``
        steps.
    max_grad_norm : float
        C: each example's gradient is clipped to ℓ2 norm C.
    delta : float
        δ of the guarantee.
    noise_multiplier, target_epsilon : float
        Exactly one: σ/C directly, or the ε the whole run must reach (calibrated by dpkit's
        accountant on the event of ``sampling``).
    batch_size : int, optional
        Expected logical batch size (default: the DataLoader's).
    physical_batch_size : int, optional
        Examples per forward/backward pass (default ``batch_size``); a logical batch is cut into
        as many as it needs, the last padded and masked, so shapes never vary.
    sampling : {"poisson", "shuffle", "fixed"}
        ``"poisson"``: each example in each step independently with probability q, accounted
        with amplification by subsampling (add/remove one example). ``"shuffle"``: a random
        permutation per epoch cut into full batches, accounted as what it is: one Gaussian per
        epoch with twice the sensitivity, replace-one neighbours, no amplification claimed.
        ``"fixed"``: exactly ``batch_size`` examples drawn without replacement each step from
        data of exactly ``n_samples`` examples, accounted as what it is: the subsampled Gaussian
        without replacement under replace-one neighbours (twice the sensitivity; Balle, Barthe &
        Gaboardi 2018), by PLD only (``accounting="rdp"`` is refused).
    clipping : {"flat", "per_layer", "adaptive", "adaptive_per_layer"}
        Clip each example's whole gradient to C, or each layer's part to C/√L, or (adaptive
        clipping, Andrew, Thakkar, McMahan & Ramaswamy 2021) the whole gradient to a norm C_t
        that starts at ``max_grad_norm`` and after each step moves geometrically toward the
        ``target_quantile`` of the gradient norms, from a noisy count of the unclipped ones:
        ``C_{t+1} = C_t·exp(−clip_learning_rate·(b̃ − target_quantile))``. The count's noise
        ``count_noise`` (σ_b, default ``batch_size/20`` as the paper recommends) is paid from
        the declared budget: the gradient noise multiplier becomes
        ``(z⁻² − (2σ_b)⁻²)^(−1/2)`` so that sum and count together are the run of multiplier z
        (see :func:`plan_training`). Noise scales with C_t. ``"adaptive_per_layer"``: each of
        the L layers' parts is clipped to its own norm C_{l,t} (from ``max_grad_norm/√L``), each
        moved toward the ``target_quantile`` of its layer's norms by its own noisy count; the
        noise scales with S_t = √Σ C_{l,t}² (McMahan et al. 2018, per-layer clipping). The L
        counts (default noise ``√L·batch_size/20`` each) are paid from the declared budget as
        one Gaussian with ℓ2 sensitivity ½√L: the gradient multiplier is
        ``(z⁻² − L·(2σ_b)⁻²)^(−1/2)``.
    target_quantile, clip_learning_rate, count_noise : float
        γ, η and σ_b of adaptive clipping (used only with the adaptive ``clipping``).
    units : array-like, optional
        User-level privacy (Charles et al. 2024, "Fine-tuning large language models with
        user-level differential privacy", user-level sampling): one privacy-unit id per example
        of ``data``. Each step then Poisson-samples *units* (``n_samples`` and ``batch_size``
        count units), takes at most ``max_examples_per_unit`` of each sampled unit's examples
        (a fresh random choice per step) and clips each unit's summed gradient to C, so the
        guarantee is for adding or removing a whole unit. ``physical_batch_size`` counts units.
    max_examples_per_unit : int, optional
        k: the bound on each unit's examples per step (required with ``units``).
    accountant : Accountant, optional
        Charged the whole run's event now, before any step (refuses if it does not fit).
    accounting : {"auto", "pld", "rdp"}
        How ε is computed and ``target_epsilon`` calibrated (``"auto"``: the better of PLD and
        RDP; ``"rdp"`` is the fastest).
    rng : None, int or numpy.random.Generator
        ``None`` (default): dpkit's secure generator for sampling and noise. A seed makes the run
        reproducible and **not private** (warned when an accountant is charged).
    noise : {"auto", "numpy", "device"}
        Where each step's exact noise is drawn: ``"device"`` on the parameters' device (ChaCha20
        in torch integer ops, keyed from ``rng``'s generator, pooled over steps), ``"numpy"`` by
        :func:`dpkit.noise.gaussian` on the CPU; ``"auto"`` (default): the device off the CPU,
        NumPy (faster there) on it. The distribution is the same either way.

    Returns
    -------
    PrivateTraining
        Unpacks as ``model, optimizer, loader``; has ``plan``, ``epsilon()`` and ``fit()``.

    Notes
    -----
    Privacy guarantee: the sequence of model parameters satisfies ``plan.event`` — for
    ``"poisson"`` ``steps`` compositions of the Poisson-subsampled Gaussian mechanism of rate q
    with sensitivity Δ (C, raised by the grid rounding) and noise ``plan.sigma``, under add/remove
    of one example; (ε, δ) from dpkit's PLD/RDP accountant. Each step's noise is dpkit's exact
    discrete Gaussian on a power-of-two grid added to the clipped sum, computed in float64 from
    float32 per-example gradients clipped with a margin of 2⁻¹⁶.

    Examples
    --------
    >>> import torch
    >>> from torch.utils.data import TensorDataset
    >>> from dpkit.random import seeded
    >>> torch.manual_seed(0) and None
    >>> X, y = torch.randn(200, 5), torch.randint(0, 2, (200,))
    >>> model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    >>> opt = torch.optim.SGD(model.parameters(), lr=0.5)
    >>> run = make_private(model, opt, TensorDataset(X, y), n_samples=200, batch_size=50,
    ...                    epochs=2, max_grad_norm=1.0, delta=1e-5, noise_multiplier=1.0,
    ...                    rng=seeded(1))
    >>> run.plan.steps
    8
    >>> _ = run.fit(torch.nn.CrossEntropyLoss(reduction="none"))
    >>> round(run.epsilon(), 2)
    5.46
    """
    dataset, loader_batch, collate = _dataset(data)
    b = batch_size if batch_size is not None else loader_batch
    if b is None:
        raise PrivacyParameterError("batch_size is required (the expected logical batch size).")
    group = 1
    if units is not None or max_examples_per_unit is not None:
        k = max_examples_per_unit
        if units is None or isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise PrivacyParameterError(
                "user-level privacy needs both units and max_examples_per_unit (a positive int)."
            )
        group = k
    phys = b if physical_batch_size is None else physical_batch_size
    if isinstance(phys, bool) or not isinstance(phys, int) or phys < 1:
        raise PrivacyParameterError("physical_batch_size must be a positive int.")
    if not isinstance(model, nn.Module) or not isinstance(optimizer, torch.optim.Optimizer):
        raise PrivacyParameterError("model must be a torch.nn.Module and optimizer an Optimizer.")
    clipper = Clipper(
        model,
        max_grad_norm=max_grad_norm,
        clipping=clipping,
        target_quantile=target_quantile,
        clip_learning_rate=clip_learning_rate,
    )
    adaptive = clipping in ("adaptive", "adaptive_per_layer")
    counts = len(clipper.rules) if clipping == "adaptive_per_layer" else 1
    if adaptive and count_noise is None:
        # σ_b = expected batch / 20 (Andrew et al. 2021); L per-layer counts get √L times it
        # each, so together they cost what the one count does
        count_noise = b / 20 * math.sqrt(counts)
    try:  # a refusal leaves the model unhooked, as it was
        plan: TrainingPlan = plan_training(
            n_samples=n_samples,
            batch_size=b,
            epochs=epochs,
            max_grad_norm=max_grad_norm,
            dimension=parameter_count(clipper.rules),
            delta=delta,
            sampling=sampling,
            noise_multiplier=noise_multiplier,
            target_epsilon=target_epsilon,
            accounting=accounting,
            count_noise=count_noise if adaptive else None,
            count_dimension=counts,
        )
        gen = as_generator(rng)
        loader = PrivateLoader(
            dataset,
            sample_rate=plan.sample_rate,
            batch_size=b,
            physical_batch_size=phys,
            steps_per_epoch=plan.steps_per_epoch,
            sampling=sampling,
            gen=gen,
            collate=collate,
            units=units,
            group=group,
        )
        private_opt = PrivateOptimizer(
            optimizer, clipper=clipper, plan=plan, loader=loader, gen=gen, noise=noise
        )
        charge_release(
            accountant, plan.event, "dpkit.torch training run", rng=rng, delta=plan.delta
        )
    except BaseException:
        clipper.remove()
        raise
    # one forward, one backward: a new forward pass forgets calls recorded without a backward
    clipper.add_handle(model.register_forward_pre_hook(lambda _m, _i: clipper.discard()))
    return PrivateTraining(model, private_opt, loader, plan)
