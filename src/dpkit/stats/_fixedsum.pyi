"""Types of the compiled one-pass block sum (``_fixedsum.c``)."""

def block_sum(
    x: object, start: int, stop: int, lo: float, hi: float, magic: float, base: int, /
) -> tuple[int, bool]: ...
