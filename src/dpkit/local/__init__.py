"""The local model: each user randomizes their own value before it leaves their device.

Kamath 2020 ("Local vs central") and Wasserman's lecture notes "Differential Privacy" start from
randomized response (Warner 1965) because it needs no
trusted curator. :mod:`dpkit.local` has two halves that share nothing but public parameters:

* **clients** (``randomize``): one value → one report, ε-LDP, with exact coins from the secure
  generator (vectorised to simulate millions of users);
* **servers** (``estimate``, ``aggregator``): reports → unbiased estimates with exact variances
  and confidence intervals (post-processing, no further privacy cost).

Reports are plain integer arrays (documented per protocol) tagged with the protocol and its
parameters, so reports of another protocol or parameter set are refused. See ``docs/local.md``.
"""

from __future__ import annotations

from dpkit.local._choose import PROTOCOLS, candidates, choose_protocol
from dpkit.local._estimate import FrequencyEstimate, norm_sub
from dpkit.local._grr import GRR
from dpkit.local._hadamard import HadamardResponse
from dpkit.local._heavy import HeavyHitters, PrefixExtension
from dpkit.local._numeric import (
    DuchiMean,
    HybridMean,
    MeanEstimate,
    NumericRandomizer,
    PiecewiseMean,
)
from dpkit.local._olh import OLH, universal_hash
from dpkit.local._oracle import Aggregator, FrequencyOracle
from dpkit.local._rappor import Rappor, RapporClient, RapporEstimate
from dpkit.local._reports import Reports
from dpkit.local._shuffle import shuffle_delta, shuffle_epsilon, shuffle_guarantee
from dpkit.local._sketch import CountMeanSketch, SketchEstimate, sketch_hash
from dpkit.local._subset import SubsetSelection
from dpkit.local._telemetry import DBitEstimate, DBitFlip, MemoizedOneBitClient, OneBitMean
from dpkit.local._unary import OUE, SUE, UnaryEncoding
from dpkit.local._vector import VectorMean, VectorMeanEstimate, VectorReports

__all__ = [
    "GRR",
    "OLH",
    "OUE",
    "PROTOCOLS",
    "SUE",
    "Aggregator",
    "CountMeanSketch",
    "DBitEstimate",
    "DBitFlip",
    "DuchiMean",
    "FrequencyEstimate",
    "FrequencyOracle",
    "HadamardResponse",
    "HeavyHitters",
    "HybridMean",
    "MeanEstimate",
    "MemoizedOneBitClient",
    "NumericRandomizer",
    "OneBitMean",
    "PiecewiseMean",
    "PrefixExtension",
    "Rappor",
    "RapporClient",
    "RapporEstimate",
    "Reports",
    "SketchEstimate",
    "SubsetSelection",
    "UnaryEncoding",
    "VectorMean",
    "VectorMeanEstimate",
    "VectorReports",
    "candidates",
    "choose_protocol",
    "norm_sub",
    "shuffle_delta",
    "shuffle_epsilon",
    "shuffle_guarantee",
    "sketch_hash",
    "universal_hash",
]
