"""Per exercise: how its hidden records are compared, and which torch functions it forbids.

The default compares every number with ``rtol=1e-4, atol=1e-5`` (float32 answers computed in a
different order than the solution's differ by far less), integers, booleans and strings exactly,
and a module by its parameters' names, shapes and which of them share storage or are one object.
An exercise that says "without nn.LayerNorm" lists the torch function names it forbids, as
``TorchFunctionMode`` reports them (``layer_norm``, ``embedding``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

# The visible checks of these lessons refuse the same calls the grade does: one list, kept there.
from helpers.checks import depth, position, residual, transfer, tying


@dataclass(frozen=True)
class Spec:
    rtol: float = 1e-4
    atol: float = 1e-5
    forbid: tuple[str, ...] = ()
    # regular expressions: a recorded call whose name matches one (re.search) is forbidden too
    forbid_matching: tuple[str, ...] = ()
    same_values: tuple[str, ...] = ()  # module parameters a repair must keep unchanged
    # (part, what was expected, in words): a verdict on a part of the answer that differs says it
    # (the part: the answer itself, or a key of the dict the hidden test records); never a value
    expected: tuple[tuple[str, str], ...] = ()


# The "RMSNorm from the formula" spec (l5_ex4, below): every torch
# normalization by pattern (a review found each of these computing the answer: the layer norm
# of [x, -x] is RMSNorm, so are local_response_norm with beta 1/2, aten's
# _native_batch_norm_legit.no_stats on [x, -x], F.normalize with an extra column), except the
# vector norms a formula may use (torch.norm, linalg.vector_norm, frobenius_norm: ||x|| / sqrt(d)
# is an RMS);
# and the course's own LayerNorm and RMSNorm modules (seen by the profiler)
_TORCH_NORMS = (
    r"(?<!vector)(?<!frobenius)(?<!^)_norm(?!s)",
    r"^normalize",
    r"^_?native_.*norm",
    r"norm_legit",
)
_COURSE_NORMS = tuple(
    f"helpers.normalization.{cls}.{method}"
    for cls in ("LayerNorm", "RMSNorm")
    for method in ("forward", "__init__")
)

#: Exercises that differ from the default, by the solution cell's grade_id.
#:
#: A forbidden course function counts wherever the answer's call tree reaches it
#: (helpers.grading records course functions at any depth): a helper that calls it for the
#: answer does not launder it. Checked that no honest route passes through such a helper: the
#: callers of apply_rotary/rotation_matrix and alibi_bias/alibi_slopes (l4b_ex1, l4b_ex2) are
#: attention, generation's cache and the position widget; of RMSNorm (l5b_ex1), make_norm and the
#: blocks and models built with norm="rms".
SPECS: dict[str, Spec] = {
    # lesson 4 (core): ex 1 a pair index, ex 2 an offset (whole numbers, compared exactly), ex 3
    # a probe's verdicts (bools): the defaults. Its companion 04b: ex 1 and 2 (C4.8) write rotary
    # (half-split) and ALiBi's bias: not the library's versions, which compute the answer
    # outright (helpers.grading sees the course's functions an answer calls; the visible checks
    # refuse the same names: helpers.checks.position.FORBIDDEN)
    # ex 3's verdicts, each named by what it says (the hidden layers include two whose sum over
    # the rows is permutation-invariant, as the visible check's do: a probe comparing sums fails)
    "l4_ex3": Spec(
        expected=(
            (
                "the answer",
                "True exactly for a layer with layer(x[:, order]) equal to layer(x)[:, order] "
                "for every order of the rows (its rows compared, not their sum)",
            ),
        ),
    ),
    "l4b_ex1": Spec(forbid=position.FORBIDDEN["l4b_ex1"]),
    "l4b_ex2": Spec(forbid=position.FORBIDDEN["l4b_ex2"]),
    # lesson 5: ex 1 predicts layer norm's output (no x to compute it from: nothing forbidden),
    # ex 2 and 3 the defaults. Its companion 05b: ex 1 gets RMSNorm from a layer norm: RMSNorm
    # itself and its formula's arithmetic are refused (helpers.checks.residual.FORBIDDEN and
    # FORBIDDEN_MATCHING, which the visible check refuses too); ex 2 (bools) below
    "l5b_ex1": Spec(
        forbid=residual.FORBIDDEN["l5b_ex1"],
        forbid_matching=residual.FORBIDDEN_MATCHING["l5b_ex1"],
    ),
    # ex 2: the pair recorded by name (the hidden test's _named), each part described
    "l5b_ex2": Spec(
        expected=(
            (
                "same_after_shift",
                "True exactly when the norm's output stays the same (allclose, rtol = atol = "
                "1e-4) after one constant is added to every feature of each token",
            ),
            (
                "same_after_scale",
                "True exactly when the norm's output stays the same (allclose, rtol = atol = "
                "1e-4) after each token is multiplied by a positive factor",
            ),
        ),
    ),
    # RMSNorm from the formula (lesson 5's exercise 4 until its companion 05b took C5.8; no
    # notebook uses it now: tests/test_grading.py's synthetic lesson grades under it): the
    # list of the torch normalizations (checked: nn.RMSNorm, F.rms_norm, torch.rms_norm and aten.rms_norm report "rms_norm"; layer_norm of [x, -x] is
    # RMSNorm too), aten's _fused_rms_norm, and the course's own RMSNorm (seen by the profiler)
    "l5_ex4": Spec(
        forbid=tuple(
            f"{prefix}{name}_norm{overload}"
            for name in ("layer", "group", "instance", "batch", "rms", "_fused_rms")
            for prefix in ("", "native_")
            for overload in ("", ".default")
        )
        + ("helpers.normalization.RMSNorm.forward", "helpers.normalization.RMSNorm.__init__")
        + _COURSE_NORMS,
        forbid_matching=_TORCH_NORMS,
    ),
    # lesson 7 ex 1 "use the formulas, not a model": no parameter made (empty), no size read
    # (numel, size, len, .shape/.nbytes are __get__, ...), aten overloads too (checked); the
    # visible check refuses the same names (helpers.checks.depth._MODEL_CALLS)
    "l7_ex1": Spec(forbid=depth.FORBIDDEN["l7_ex1"]),
    # lesson 6: ex 1 (M, c) of the block without its nonlinearity, recorded by name (nothing is
    # forbidden: probing the map with the identity is honest too); ex 2 the hidden test records
    # the answer's distance to the nearest peak of |f - g| (on its own 200001-point grid, pairs,
    # scales and ranges drawn from the secret): within 0.005 of the solution's (about 0), the
    # tolerance the exercise states; ex 3 lists of bools, the defaults
    "l6_ex1": Spec(  # the pair recorded by name (the hidden test's _named), each part described
        expected=(
            (
                "M",
                "the [d_model, d_model] matrix of the single linear map x M + c that equals the "
                "block without its nonlinearity, (x W1 + b1) W2 + b2, for every x",
            ),
            ("c", "the [d_model] offset of that same map (what it gives at x = 0)"),
        ),
    ),
    "l6_ex2": Spec(
        rtol=0.0,
        atol=0.005,
        expected=(
            (
                "the answer",
                "the distance from your x to the nearest point where |f(x) - g(x)| is largest "
                "(0 at a peak; the exercise allows 0.005)",
            ),
        ),
    ),
    # ex 3: one verdict per hidden suspect (as the visible check's, which includes two functions
    # that only some positions reach: a test that nudges one position only fails both)
    "l6_ex3": Spec(
        expected=(
            (
                "the answer",
                "True exactly when some output row of the suspect depends on an input row other "
                "than its own (each position changed in turn, every other row looked at)",
            ),
        ),
    ),
    # lesson 8: ex 1 a list of row numbers (ints, compared exactly) and ex 2 a tied model's
    # behaviour, the defaults; ex 3 the cosine within the tolerance the exercise states, the one
    # the visible check uses (helpers.checks.tying.COSINE_TOLERANCE)
    "l8_ex3": Spec(rtol=0.0, atol=tying.COSINE_TOLERANCE),
    # ex 4 (going further): a GPT-2-layout checkpoint mapped into the course's model, graded by its
    # logits on hidden checkpoints of other sizes (the defaults' float32 tolerance); the course's
    # converters hold the mapping itself and are refused, as the visible check refuses them
    # (helpers.checks.transfer.FORBIDDEN_MATCHING)
    "l8_ex4": Spec(
        forbid_matching=transfer.FORBIDDEN_MATCHING["l8_ex4"],
        expected=(
            ("logits", "those of the checkpoint's own model, every tensor in its place"),
            ("tied", "True: lm_head.weight still the embedding's own tensor"),
            ("the model it was given", "True: the given model filled and returned"),
        ),
    ),
    # lesson 9: ex 1 the temperature for a top probability: the defaults (its hidden cases record
    # the top probability at the answer's T, any function allowed); ex 2 the most likely pair of
    # next ids (the hidden test records the answer's pair for each prompt, as ints a and b,
    # compared exactly; any function allowed: no course function computes it); ex 3 top-p, the defaults
    "l9_ex2": Spec(
        rtol=0.0,
        atol=0.0,
        expected=(
            (
                "a",
                "the first id of the pair (a, b) with the largest p(a | prompt) p(b | prompt, a) "
                "among all V^2 pairs (not always the greedy pair's first id)",
            ),
            ("b", "the second id of that same pair, the likeliest pair of next ids"),
        ),
    ),
    # the capstone: a repair keeps the model it was given (a fresh model would draw new weights),
    # and gives each depth fresh weights (deep copies alone are identical: the visible check
    # refuses them too, by the same helpers.checks.audit.blocks_with_the_same_weights)
    "l10_ex1": Spec(
        same_values=("token_embedding.weight",),
        expected=(
            (
                "the repaired model",
                "the model it was given, with an independent block at each depth",
            ),
            (
                "fresh weights at every depth",
                "True: each block's weight matrices freshly drawn (init_weights(block)), unlike "
                "every other block's, not deep copies of one block",
            ),
        ),
    ),
    # ex 2: the tied model's behaviour, named
    "l10_ex2": Spec(
        expected=(
            (
                "the tied model's",
                "those of the model it was given with its logits computed from the embedding "
                "matrix itself (h @ W_E^T) and no output matrix of its own",
            ),
            (
                "the embedding's gradient",
                "the gradient through both the embedding lookup and the tied output",
            ),
        ),
    ),
    # ex 3: the repair's logits against the lesson's order of steps (the hidden models keep the
    # broken model's unscaled embeddings, so self.embed and self.position(self.token_embedding)
    # agree; the visible check compares the same: helpers.checks.audit.repaired_logits_problem)
    "l10_ex3": Spec(
        expected=(
            (
                "the repaired model's output",
                "those of the same weights run as self.embed(tokens), every block in order, then "
                "self.final_norm and self.lm_head (is the final norm applied?)",
            ),
            ("RepairedLM", "True: a subclass of PositionAfterFirstBlockLM with its own forward"),
        ),
    ),
    # the capstone's open-ended audit: five verdict strings, compared exactly, as the hidden test
    # records them through helpers.checks.audit.normalized_verdicts (spaces and case do not count)
    "l10_ex4": Spec(
        rtol=0.0,
        atol=0.0,
        expected=(
            (
                "K",
                "the verdict the sheet's rule gives on this model (the audit where it decides, an "
                "experiment where it cannot)",
            ),
        ),
    ),
}


def spec_for(exercise: str) -> Spec:
    return SPECS.get(exercise, Spec())
