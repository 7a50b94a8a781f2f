"""The optional compiled kernel of the exact sum; every other setting is in pyproject.toml.

``optional=True``: where no C compiler is found the install still succeeds and
``dpkit.stats._fixed`` uses its NumPy path, which computes the same integers.
"""

import sys

from setuptools import Extension, setup

# -O3 vectorises the loop; never -ffast-math (it assumes no NaN and reorders float operations).
FLAGS = [] if sys.platform == "win32" else ["-O3", "-fno-fast-math", "-std=c99"]

setup(
    ext_modules=[
        Extension(
            "dpkit.stats._fixedsum",
            sources=["src/dpkit/stats/_fixedsum.c"],
            extra_compile_args=FLAGS,
            optional=True,
        )
    ]
)
