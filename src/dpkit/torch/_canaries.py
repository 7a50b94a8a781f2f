"""Gradient-space canaries for the one-run audit: Dirac gradients inserted into a private run.

Steinke, Nasr & Jagielski (2023, "Privacy Auditing with One (1) Training Run"), white-box
setting: canary i is an example whose clipped gradient is ``±C·e_{j_i}`` (a Dirac on coordinate
``j_i`` of the flattened parameters, of norm C, the most one example may contribute). Each canary
is in the run by a secret fair coin; an included canary is Poisson-sampled with the run's rate q
at every step, like any example, and its gradient added to the clipped sum before the noise.
The score of canary i is ``±`` the coordinate ``j_i`` of the released noisy sums, summed over
the steps (every iterate observed), or of the parameters' change over the run (the final model
alone). Canaries only ever add to the sum: they change nothing else of the run.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from dpkit.audit import OneRunResult, draw_canary_coins, one_run_bound
from dpkit.errors import PrivacyParameterError
from dpkit.random import RNGLike, as_generator
from dpkit.torch._engine import PrivateTraining

__all__ = ["GradientCanaries"]

OBSERVE = ("steps", "final")


class GradientCanaries:
    """``count`` Dirac gradient canaries inserted into the private run ``run`` (white box).

    Make them after :func:`make_private` and before the first step, train (``run.fit`` or a
    loop of your own), then call :meth:`audit`. The bound is for add/remove of one example, so
    the run must sample by Poisson; declare its ``n_samples`` to include the expected
    ``count // 2`` canaries, as for input-space canaries.

    Parameters
    ----------
    run : PrivateTraining
    count : int
        m, the number of canaries (at most the number of trainable parameters).
    coordinates : sequence of int, optional
        The coordinate of each canary in the flattened trainable parameters (in the order of
        ``run.optimizer.clipper.params``), distinct; default: drawn at random. Coordinates that
        the real data moves little (e.g. of an unused embedding row) give a sharper audit.
    rng : None, int or numpy.random.Generator
        For the coins, the coordinates, the signs and the canaries' sampling (dpkit's secure
        generator by default); the scores never see the coins.

    Examples
    --------
    >>> import torch
    >>> from torch.utils.data import TensorDataset
    >>> from dpkit.random import seeded
    >>> from dpkit.torch import make_private
    >>> torch.manual_seed(0) and None
    >>> X, y = torch.randn(200, 20), torch.randint(0, 2, (200,))
    >>> model = torch.nn.Linear(20, 2)
    >>> run = make_private(model, torch.optim.SGD(model.parameters(), lr=0.5),
    ...                    TensorDataset(X, y), n_samples=220, batch_size=50, epochs=2,
    ...                    max_grad_norm=1.0, delta=1e-5, noise_multiplier=2.0, rng=seeded(1))
    >>> canaries = GradientCanaries(run, count=40, rng=seeded(2))
    >>> _ = run.fit(torch.nn.CrossEntropyLoss(reduction="none"))
    >>> r = canaries.audit(guess_in=5, guess_out=5, delta=1e-5)
    >>> r.epsilon <= run.epsilon()
    True
    """

    def __init__(
        self,
        run: PrivateTraining,
        *,
        count: int,
        coordinates: npt.ArrayLike | None = None,
        rng: RNGLike = None,
    ) -> None:
        if not isinstance(run, PrivateTraining):
            raise PrivacyParameterError("run must be what make_private returned.")
        opt = run.optimizer
        if run.plan.sampling != "poisson":
            raise PrivacyParameterError(
                'gradient canaries audit add/remove neighbours: use sampling="poisson".'
            )
        if opt.steps_taken or opt.canaries is not None:
            raise PrivacyParameterError(
                "insert canaries once, before the run's first step (every step must hold them)."
            )
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise PrivacyParameterError("count must be a positive int.")
        params = opt.clipper.params
        dim = sum(p.numel() for p in params)
        if count > dim:
            raise PrivacyParameterError("count must be at most the number of parameters.")
        gen = as_generator(rng)
        self.coins = draw_canary_coins(count, rng=gen)
        if coordinates is None:
            coords = np.sort(gen.choice(dim, size=count, replace=False))
        else:
            coords = np.asarray(coordinates)
            if (
                coords.shape != (count,)
                or coords.dtype.kind not in "iu"
                or len(np.unique(coords)) != count
                or not ((coords >= 0) & (coords < dim)).all()
            ):
                raise PrivacyParameterError(
                    "coordinates must be count distinct ints, each below the parameter count."
                )
        self.count = count
        self.coordinates = coords.astype(np.int64)
        self.signs = np.where(gen.integers(0, 2, size=count) == 1, 1.0, -1.0)
        self._gen = gen
        self._run = run
        self._rate = run.plan.sample_rate
        self._magnitude = run.plan.max_grad_norm  # C₀: the clipped sum's units
        device = opt.device
        self._idx = torch.from_numpy(self.coordinates).to(device)
        self._signs = torch.from_numpy(self.signs).to(device)
        self._coins = torch.from_numpy(self.coins).to(device)
        self._start = self._params()
        self._seen = torch.zeros(count, dtype=torch.float64, device=device)
        self.steps = 0
        opt.canaries = self

    def _params(self) -> Tensor:
        flat = torch.cat([p.detach().reshape(-1) for p in self._run.optimizer.clipper.params])
        return flat[self._idx].to(torch.float64)

    def insert(self, flat: Tensor) -> None:
        """Add the sampled included canaries' gradients to one step's clipped sum, in place."""
        sampled = torch.from_numpy(self._gen.random(self.count) < self._rate).to(flat.device)
        take = (sampled & self._coins).to(torch.float64)
        flat.index_add_(0, self._idx, take * self._signs * self._magnitude)

    def observe(self, noisy: Tensor) -> None:
        """Record the released noisy sum at the canaries' coordinates."""
        self._seen += noisy[self._idx] * self._signs
        self.steps += 1

    def scores(self, observe: str = "steps") -> npt.NDArray[np.float64]:
        """Each canary's score (higher: more likely included), from the run's outputs only.

        ``"steps"``: the signed sum of its coordinate of the noisy sums over the steps (every
        iterate seen); ``"final"``: minus the signed change of its parameter over the run (the
        final model alone; a descent step moves a parameter against its gradient).
        """
        if observe not in OBSERVE:
            raise PrivacyParameterError('observe must be "steps" or "final".')
        if observe == "steps":
            return np.asarray(self._seen.cpu().numpy(), dtype=np.float64)
        moved = (self._params() - self._start) * self._signs
        return np.asarray(-moved.cpu().numpy(), dtype=np.float64)

    def audit(
        self,
        *,
        guess_in: int,
        guess_out: int,
        delta: float,
        observe: str = "steps",
        confidence: float = 0.95,
    ) -> OneRunResult:
        """The ε lower bound of the run from its canaries (:func:`dpkit.audit.one_run_bound`).

        Valid with probability ``confidence`` for add/remove of one example; a bound above the
        run's claimed ε at ``delta`` proves the claim wrong.
        """
        if self.steps == 0:
            raise PrivacyParameterError("the run has taken no step: train it before auditing.")
        return one_run_bound(
            self.scores(observe),
            self.coins,
            guess_in=guess_in,
            guess_out=guess_out,
            delta=delta,
            confidence=confidence,
        )
