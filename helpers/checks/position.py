"""Lesson 4's exercise checks, as the notebooks import them (``from helpers.checks import
position as checks``): the core lesson's (04) from :mod:`helpers.checks.position_encoding`, the
companion 04b's from :mod:`helpers.checks.position_attention`. Split by lesson; nothing is
defined here.
"""

from __future__ import annotations

from ._core import call as call  # the lesson's checks module offers call, as before the split
from .position_attention import FORBIDDEN, check_alibi_bias, check_rotary_half_split
from .position_encoding import check_best_pair, check_offset_between, check_permutation_probe

__all__ = [
    "check_best_pair",
    "check_offset_between",
    "check_permutation_probe",
    "check_rotary_half_split",
    "check_alibi_bias",
    "FORBIDDEN",
]
