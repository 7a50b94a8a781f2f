"""Replace BatchNorm layers by per-example normalisations that keep every feature."""

from __future__ import annotations

import math

from torch import nn

__all__ = ["replace_batchnorm"]


def _groups(channels: int) -> int:
    # as many groups as divide the channels, up to 32, but at least 2 channels per group where
    # possible (GroupNorm with 1 channel per group and no spatial extent outputs 0)
    g = math.gcd(channels, 32)
    while g > 1 and channels // g < 2:
        g //= 2
    return max(g, 1)


def replace_batchnorm(model: nn.Module) -> nn.Module:
    """Replace each BatchNorm layer of ``model`` (in place) by a GroupNorm that keeps its features.

    BatchNorm normalises with statistics of the whole batch, so per-example gradients (and
    per-example clipping) are not defined for it. ``BatchNorm2d``/``BatchNorm3d`` with C channels
    become ``GroupNorm(g, C)`` with g the largest divisor of C up to 32 that leaves at least two
    channels per group; ``BatchNorm1d`` becomes ``GroupNorm(1, C)``, a normalisation over all
    features of an example (like LayerNorm), because a group of one feature without spatial
    extent would be normalised to 0 (the features would vanish). The affine setting is kept.

    Returns the model, for chaining. The normalisation changes, so accuracy may differ:
    fine-tune or retrain after replacing.

    Examples
    --------
    >>> from torch import nn
    >>> m = replace_batchnorm(nn.Sequential(nn.Conv2d(3, 16, 3), nn.BatchNorm2d(16)))
    >>> m[1]
    GroupNorm(8, 16, eps=1e-05, affine=True, bias=True)
    >>> replace_batchnorm(nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8)))[1]
    GroupNorm(1, 8, eps=1e-05, affine=True, bias=True)
    """
    for name, child in list(model.named_children()):
        if isinstance(child, nn.modules.batchnorm._BatchNorm):
            c = child.num_features
            groups = 1 if isinstance(child, nn.BatchNorm1d) else _groups(c)
            setattr(model, name, nn.GroupNorm(groups, c, eps=child.eps, affine=child.affine))
        else:
            replace_batchnorm(child)
    return model
