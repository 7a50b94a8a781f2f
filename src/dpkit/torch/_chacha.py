"""ChaCha20 (RFC 8439) in torch integer ops: a secure counter-mode stream on the model's device.

The block function is computed for many block counters at once: the 4×4 state is a tensor of
shape (4, 4, n), so each of the eight quarter-round operations of a column (or diagonal) round is
one tensor operation over all four columns of every block. The 32-bit words are held in int64
tensors and every addition is masked back to 32 bits (``& 0xFFFFFFFF``), so nothing relies on
signed overflow; rotations shift within 64 bits (at most ``2**32 << 16 < 2**48``).

Stream layout: the 256-bit key fills words 4–11, words 12–13 hold a 64-bit block counter
(low word first) and words 14–15 a 64-bit stream id, as in Bernstein's original ChaCha; the block
function itself is RFC 8439's, which takes word 12 as a 32-bit counter and words 13–15 as its
96-bit nonce (:func:`chacha20_blocks` accepts either). ChaCha20 is a pseudorandom function of the
key: with a secret uniformly random key the words are computationally indistinguishable from
independent uniform 32-bit words (Bernstein 2008, "ChaCha, a variant of Salsa20"; RFC 8439).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from dpkit.errors import PrivacyParameterError

__all__ = ["ChaChaStream", "chacha20_blocks", "key_words", "random_key"]

MASK = 0xFFFFFFFF
_SIGMA = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)  # "expand 32-byte k"


def key_words(key: bytes) -> list[int]:
    """The eight little-endian 32-bit words of a 32-byte key."""
    if not isinstance(key, bytes) or len(key) != 32:
        raise PrivacyParameterError("a ChaCha20 key is 32 bytes.")
    return [int.from_bytes(key[4 * i : 4 * i + 4], "little") for i in range(8)]


def _rotl(x: Tensor, r: int) -> Tensor:
    return ((x << r) & MASK) | (x >> (32 - r))


def _quarter(a: Tensor, b: Tensor, c: Tensor, d: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    # RFC 8439 §2.1, on whole rows: each tensor holds one word of four quarter rounds per block
    a = (a + b) & MASK
    d = _rotl(d ^ a, 16)
    c = (c + d) & MASK
    b = _rotl(b ^ c, 12)
    a = (a + b) & MASK
    d = _rotl(d ^ a, 8)
    c = (c + d) & MASK
    b = _rotl(b ^ c, 7)
    return a, b, c, d


def _double_round(a: Tensor, b: Tensor, c: Tensor, d: Tensor) -> tuple[Tensor, ...]:
    """A column round then a diagonal round, on the state's four rows (each (4, n))."""
    a, b, c, d = _quarter(a, b, c, d)
    # diagonals (0,5,10,15), (1,6,11,12), (2,7,8,13), (3,4,9,14): rotate rows 1–3 left
    b, c, d = b.roll(-1, 0), c.roll(-2, 0), d.roll(-3, 0)
    a, b, c, d = _quarter(a, b, c, d)
    return a, b.roll(1, 0), c.roll(2, 0), d.roll(3, 0)


def _core(
    head: Tensor,
    tail: Sequence[Tensor],
    rounds: Callable[..., tuple[Tensor, ...]] = _double_round,
) -> Tensor:
    """The block function: ``head`` holds words 0–11, ``tail`` words 12–15 (one per block)."""
    n = tail[0].shape[0]
    last = torch.stack(tuple(tail))[None]
    init = torch.cat((head.reshape(3, 4, 1).expand(3, 4, n), last))
    a, b, c, d = init[0], init[1], init[2], init[3]
    for _ in range(10):  # 20 rounds
        a, b, c, d = rounds(a, b, c, d)
    out = (torch.stack((a, b, c, d)) + init) & MASK
    return out.permute(2, 0, 1).reshape(n, 16)


def _head(key: list[int], device: torch.device) -> Tensor:
    return torch.tensor([*_SIGMA, *key], dtype=torch.int64, device=device)


def chacha20_blocks(key: list[int], word12: Tensor, nonce: tuple[Tensor | int, ...]) -> Tensor:
    """ChaCha20 blocks (RFC 8439 §2.3) for a vector of word-12 values: shape (n, 16), int64.

    ``key`` is the eight key words, ``word12`` the block counters (int64 in [0, 2**32)), and
    ``nonce`` words 13, 14 and 15 (ints, or int64 tensors broadcastable to ``word12``). Row i is
    the serialised block's sixteen little-endian words, each in [0, 2**32).
    """
    rest = [
        torch.as_tensor(w, dtype=torch.int64, device=word12.device).expand_as(word12) for w in nonce
    ]
    return _core(_head(key, word12.device), [word12, *rest])


_COMPILED: dict[str, Callable[..., tuple[Tensor, ...]]] = {}


def _compiled_rounds() -> Callable[..., tuple[Tensor, ...]] | None:
    """A double round compiled into one GPU kernel by ``torch.compile``, when it can be.

    Eager torch runs each of a double round's ~60 tensor operations as its own kernel, reading
    and writing the whole state each time; compiled, a double round reads and writes it once.
    Integer operations are exact, so the words are the same (the CUDA tests compare them with
    the CPU's). ``DPKIT_TORCH_COMPILE=0`` turns it off.
    """
    if os.environ.get("DPKIT_TORCH_COMPILE", "1") == "0":
        return None
    if "cuda" not in _COMPILED:
        _COMPILED["cuda"] = torch.compile(_double_round, dynamic=False, fullgraph=True)
    return _COMPILED["cuda"]


class ChaChaStream:
    """Uniform 32-bit words from ChaCha20 under a 256-bit key, generated on ``device``.

    Block ``i`` of the stream is the block function with the 64-bit counter ``i`` in words
    12–13 and ``stream`` in words 14–15. Blocks are made ``chunk`` at a time (one fixed shape,
    few kernel launches) into a buffer; words are handed out in stream order and each once: a
    returned tensor may be a view of the buffer, whose served part is never served again.

    Parameters
    ----------
    key : bytes
        32 bytes. dpkit draws them from the run's generator, by default its secure one (AES
        counter mode keyed from the operating system); torch's generator is never used.
    device : torch.device or str
    stream : int
        A 64-bit stream id (different ids give independent streams under one key).
    chunk : int, optional
        Blocks per call of the block function (default 2**19 on a GPU, 2**10 elsewhere).

    Examples
    --------
    >>> import os
    >>> s = ChaChaStream(os.urandom(32), "cpu")
    >>> w = s.words(5)
    >>> w.dtype, bool(((w >= 0) & (w < 2**32)).all())
    (torch.int64, True)
    """

    def __init__(
        self, key: bytes, device: torch.device | str, *, stream: int = 0, chunk: int | None = None
    ) -> None:
        self.device = torch.device(device)
        self._head = _head(key_words(key), self.device)
        if not 0 <= stream < 1 << 64:
            raise PrivacyParameterError("stream must be a 64-bit unsigned int.")
        gpu = self.device.type == "cuda"
        # eager, each of the block function's ~600 operations is a kernel launch: 2**19 blocks
        # (8M words, 64 MB) a call keep the launches a small part of the time
        self.chunk = chunk if chunk is not None else (1 << 19 if gpu else 1 << 10)
        self._base = torch.arange(self.chunk, dtype=torch.int64, device=self.device)
        self._nonce = [
            torch.tensor(w, dtype=torch.int64, device=self.device).expand(self.chunk)
            for w in (stream & MASK, stream >> 32)
        ]
        self._rounds = (_compiled_rounds() if gpu else None) or _double_round
        self.compiled = self._rounds is not _double_round
        self.counter = 0  # next block to make
        self._buffer = torch.empty(0, dtype=torch.int64, device=self.device)

    def _blocks(self, chunks: int) -> Tensor:
        if self.counter + chunks * self.chunk > 1 << 63:
            raise PrivacyParameterError("a ChaCha20 stream is exhausted after 2**63 blocks.")
        out = []
        for _ in range(chunks):
            c = self._base + self.counter
            self.counter += self.chunk
            tail = [c & MASK, (c >> 32) & MASK, *self._nonce]
            try:
                out.append(_core(self._head, tail, rounds=self._rounds))
            except Exception:  # compilation unavailable here: the same function, eager
                if self._rounds is _double_round:
                    raise
                self._rounds, self.compiled = _double_round, False
                out.append(_core(self._head, tail))
        return torch.cat(out).reshape(-1) if len(out) > 1 else out[0].reshape(-1)

    def skip_to(self, counter: int) -> None:
        """Continue the stream at block ``counter``: nothing before it is served again.

        The buffered words are dropped, and the counter only moves forward (a block already made
        under this key is never made again), so a resumed run cannot replay noise.
        """
        if isinstance(counter, bool) or not isinstance(counter, int) or counter < 0:
            raise PrivacyParameterError("a ChaCha20 block counter is a non-negative int.")
        self.counter = max(self.counter, counter)
        self._buffer = torch.empty(0, dtype=torch.int64, device=self.device)

    def words(self, n: int) -> Tensor:
        """The next ``n`` words (int64 tensor, each in [0, 2**32))."""
        have = self._buffer.numel()
        if have < n:
            chunks = -(-(n - have) // (16 * self.chunk))
            self._buffer = torch.cat((self._buffer, self._blocks(chunks)))
        out = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return out

    def bits62(self, n: int) -> Tensor:
        """``n`` uniform 62-bit integers (int64 in [0, 2**62)) from two words each."""
        w = self.words(2 * n).reshape(n, 2)
        return w[:, 0] | ((w[:, 1] & 0x3FFFFFFF) << 32)


def random_key(gen: np.random.Generator) -> bytes:
    """A 256-bit key from a NumPy generator (dpkit's secure one unless the caller seeded it)."""
    words = gen.integers(0, 1 << 64, size=4, dtype=np.uint64)
    return b"".join(int(w).to_bytes(8, "little") for w in words.tolist())
