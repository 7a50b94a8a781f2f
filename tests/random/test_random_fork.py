"""A secure generator shared across fork() must not replay its stream in the child."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import dpkit.random as dr

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")


def _draws_in_child(gen: np.random.Generator) -> np.ndarray:
    """Fork; the child draws 8 words from ``gen`` and sends them back through a pipe."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: write and leave at once, without running the parent's test machinery
        try:
            os.close(r)
            os.write(w, gen.integers(0, 2**63, size=8, dtype=np.int64).tobytes())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while len(data) < 64:
        chunk = os.read(r, 64 - len(data))
        if not chunk:
            break
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return np.frombuffer(data, dtype=np.int64)


@pytest.mark.skipif(sys.platform == "darwin", reason="fork with threads is unsafe on macOS")
def test_parent_and_child_streams_differ_after_fork() -> None:
    gen = dr.secure_generator()
    gen.integers(0, 10, size=3)  # a used generator, as in a pre-fork server
    child = _draws_in_child(gen)
    parent = gen.integers(0, 2**63, size=8, dtype=np.int64)
    assert child.size == 8
    # Identical streams would match in all 8 words; independent 63-bit words match with
    # probability 2^-63 each.
    assert not np.any(child == parent)


def test_noise_released_in_parent_and_child_does_not_cancel() -> None:
    from dpkit.noise import discrete_laplace

    gen = dr.secure_generator()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            z = np.asarray(discrete_laplace(1000, size=16, rng=gen), dtype=np.int64)
            os.write(w, z.tobytes())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while len(data) < 128:
        chunk = os.read(r, 128 - len(data))
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    child = np.frombuffer(data, dtype=np.int64)
    parent = np.asarray(discrete_laplace(1000, size=16, rng=gen), dtype=np.int64)
    # Same noise would make every difference 0; with scale 1000 each coordinate is equal with
    # probability about 1/2000, all 16 with probability ~1e-53.
    assert np.count_nonzero(child - parent) > 0


def test_seeded_generators_are_not_rekeyed() -> None:
    """Reproducibility is the point of a seed: fork must not change a seeded stream."""
    gen = dr.seeded(3)
    child = _draws_in_child(gen)
    expected = dr.seeded(3).integers(0, 2**63, size=8, dtype=np.int64)
    assert np.array_equal(child, expected)


def test_rekeyed_child_generator_is_still_secure() -> None:
    gen = dr.secure_generator()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.write(w, b"1" if dr.is_secure(gen) else b"0")
        finally:
            os._exit(0)
    os.close(w)
    flag = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    assert flag == b"1"
