"""A secure generator must not be duplicated: a copy would replay its noise."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dpkit.noise import NoisePool
from dpkit.random import SecureGenerator

COPIES: dict[str, Callable[[Any], Any]] = {
    "pickle": pickle.dumps,
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
}


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_secure_generator_cannot_be_copied(how: str) -> None:
    # A copy would continue the same AES stream, so two releases (e.g. in a process pool that
    # received a pickled generator) would share their noise and cancel in differences.
    for gen in (SecureGenerator(), NoisePool()):
        with pytest.raises(TypeError, match="replay"):
            COPIES[how](gen)


def test_a_generator_over_a_callers_bit_generator_still_copies() -> None:
    gen = SecureGenerator(np.random.PCG64(0))
    twin = copy.deepcopy(gen)
    assert twin.random() == gen.random()
