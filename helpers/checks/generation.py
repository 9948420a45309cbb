"""Lesson 9 exercise checks: from logits to tokens (C9.2).

Each check prints a one-line verdict starting with a tick, or raises
:class:`~helpers.checks.ExerciseFailed` naming what is wrong. No check holds a reference answer
or prints an expected value: each tests relations the right answer must satisfy (the
probabilities' log-ratios, the pair's probability against every other pair's, the four
properties that define the nucleus).

The three exercises (for the notebook's cells)
----------------------------------------------

Exercise 1 (grade id ``l9_ex1``, C9.2, predict then verify): ``temperature_for(logits, q)``
    ``logits`` [vocab_size] (1-D) float tensor with one largest entry, ``q`` a number with
    1/vocab_size < q < 1; returns the temperature T > 0 (a number) at which the most likely
    token of softmax(logits / T) has probability q. The top probability falls as T grows
    (from 1 toward 1/V), so a search (bisection on T or log T, Newton, ...) finds it; every case
    needs T between 0.01 and 100. Any course function may be used (``next_token_probs`` too).
    Check cell: ``generation.check_temperature_for(temperature_for)``.
    Hidden cases record :func:`top_probability` at the answer's T (compared with the grade's
    default tolerance, so any T meeting |p_top - q| <= 1e-5 + 1e-4 q scores), on logits drawn
    from a seeded ``torch.Generator`` the notebook never uses: e.g. V = 65 at q = 0.5,
    V = 20 float32 at q = 0.95, V = 12 at q = 0.15, and the lesson's prompt's own logits.

Exercise 2 (``l9_ex2``, C9.2): ``most_likely_pair(model, tokens)``
    ``model`` a :class:`~helpers.TransformerLM`, ``tokens`` a 1-D prompt of ids; returns the two
    ids (a, b) that maximize p(a | prompt) p(b | prompt, a) over all V^2 pairs, each factor the
    softmax of the logits at the last position: the most likely two-token text, which greedy
    decoding (the likeliest a, then the likeliest b) often misses. Any function is allowed.
    Check cell: ``generation.check_most_likely_pair(most_likely_pair)``.
    Hidden cases record, for each of three models built under hidden seeds (float64, untied,
    PyTorch's init: ``torch.manual_seed(s); TransformerLM(13, 16, 2, 2, max_len=16,
    positional=..., tie_weights=False, init="torch").double()``), the answer's pair as ints
    ``{"a": a, "b": b}`` for each of four prompts drawn with the model (one case per prompt); greedy is not the likeliest pair on about half
    of such prompts, so a greedy answer loses the points whatever the secret.

Exercise 3 (``l9_ex3``, transfer: nucleus sampling, Holtzman et al. 2020, not shown in the
lesson): ``top_p_filter(logits, p)``
    ``logits`` [..., vocab_size] float tensor, ``p`` in (0, 1]; returns the probabilities of
    nucleus sampling, shape of ``logits``: softmax(logits), then keep the smallest set of most
    likely tokens whose probabilities sum to at least p (the token that takes the sum to p or
    past it is kept), set the others to 0 and renormalize the kept ones to sum to 1.
    Check cell: ``generation.check_top_p_filter(top_p_filter)``.
    Hidden cases record ``top_p_filter(logits, p)`` on seeded logits, e.g. [4, 9] at p = 0.9,
    [2, 30] float64 at p = 0.5, [6] at p = 0.999, [3, 8] at p = 0.05 (only the argmax survives).
"""

from __future__ import annotations

import math

import torch

from ..grading import _CourseCalls
from ..model import TransformerLM
from ._core import ExerciseFailed, as_number, as_tensor, call_described, fail, passed

__all__ = [
    "check_temperature_for",
    "top_probability",
    "check_most_likely_pair",
    "pair_log_probs",
    "check_top_p_filter",
    "FORBIDDEN",
]

#: The course functions each exercise may not call (the grader's lists in tools/grading/spec.py
#: are these): they compute the answer outright.
FORBIDDEN: dict[str, tuple[str, ...]] = {}  # none of lesson 9's exercises forbids a function


#: A hint added to a verdict when the answer raised an error whose message holds the key.
_HINTS = {
    "must hold ids in": "an argmax without dim= flattens the batch and the vocabulary into one "
    "index; take argmax(dim=-1), over the vocabulary.",
}


def call_refusing(ex: str, fn, args: tuple, forbidden: tuple, *, name: str, shown=None):
    """Call the answer under the grader's profiler (:class:`helpers.grading._CourseCalls`) and
    refuse it, naming the call, if it called one of the ``forbidden`` course functions (the
    lists the grader uses: each check module's ``FORBIDDEN``). Lesson 4's checks use it too."""
    course = _CourseCalls()
    with course:
        got = call_described(ex, fn, args, name=name, shown=shown)
    used = sorted(n for n in course.names if n in forbidden)
    # a private helper that a public one called is named only when nothing public was called
    used = [n for n in used if not n.rsplit(".", 1)[-1].startswith("_")] or used
    if used:
        fail(
            ex,
            f"your answer calls {', '.join(used)}, which "
            f"{'computes' if len(used) == 1 else 'compute'} the answer for you: write it from "
            "the formula.",
        )
    return got


def _call(ex: str, fn, args: tuple, name: str, shown: str, forbidden: tuple = ()):
    """Call the answer; refuse it if it called one of the ``forbidden`` course functions."""
    try:
        return call_refusing(ex, fn, args, forbidden, name=name, shown=shown)
    except ExerciseFailed as e:
        hint = next((h for key, h in _HINTS.items() if key in e.problem), None)
        if hint is None:
            raise
        fail(ex, f"{e.problem} Hint: {hint}")


def _logits(shape, seed: int, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (2.0 * torch.randn(shape, generator=g, dtype=torch.float64)).to(dtype)


def _unchanged(ex: str, logits: torch.Tensor, before: torch.Tensor, name: str) -> None:
    if not torch.equal(logits, before):
        fail(ex, f"{name} changed the logits it was given (in place): work on a copy.")


def _probabilities(ex: str, got, logits: torch.Tensor, name: str) -> torch.Tensor:
    """A float tensor of the logits' shape, >= 0, each row summing to 1 over the last axis."""
    if isinstance(got, torch.Tensor) and got.shape != logits.shape:
        fail(ex, f"{name} has shape {list(got.shape)}; it should have the logits' shape "
             f"{list(logits.shape)} [..., vocab_size], one probability per token.")  # fmt: skip
    got = as_tensor(ex, got, name=name, shape=tuple(logits.shape), layout="[..., vocab_size]")
    got = got.detach().to(torch.float64)
    if (got < 0).any():
        fail(ex, f"{name} has negative entries: probabilities are >= 0 (did you apply softmax?).")
    sums = got.sum(-1)
    if not torch.allclose(sums, torch.ones_like(sums), atol=1e-5):
        if got.dim() > 1 and torch.allclose(got.sum(0), torch.ones_like(got.sum(0)), atol=1e-5):
            fail(ex, f"{name} sums to 1 down the first axis, not along the last: the vocabulary "
                 "is the last axis (softmax(..., dim=-1)).")  # fmt: skip
        worst = float(sums.flatten()[(sums - 1).abs().flatten().argmax()])
        fail(ex, f"{name}: a row sums to {worst:.4g}, not 1: the probabilities of each row must "
             "sum to 1 over the vocabulary (the last axis).")  # fmt: skip
    return got


# --- exercise 1 ---------------------------------------------------------------------------------

#: Exercise 1's tolerance, the grade's (tools/grading/spec.py's default rtol and atol, applied to
#: the top probability at the answer's temperature): |p_top(T) - q| <= ATOL + RTOL * q.
RTOL, ATOL = 1e-4, 1e-5


def top_probability(logits: torch.Tensor, temperature: float) -> float:
    """Lesson 9, exercise 1: the largest entry of softmax(logits / T), computed in float64:
    p_top(T) = 1 / sum_j exp((z_j - z_max) / T). It falls as T grows, from 1 (one largest logit,
    T -> 0) toward 1/V (T -> infinity). The grade records it at the answer's T."""
    if not isinstance(logits, torch.Tensor) or logits.dim() != 1:
        raise ValueError("logits must be a 1-D tensor [vocab_size]")
    if not (isinstance(temperature, (int, float)) and math.isfinite(temperature)
            and temperature > 0):  # fmt: skip
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    z = logits.detach().to(torch.float64)
    return float(torch.softmax(z / temperature, dim=-1).max())


#: The visible check's cases: (vocabulary size, scale of the logits, q, dtype); the needed T runs
#: from about 0.03 to about 30 and the hidden cases stay in the same range.
_TEMPERATURE_CASES = (
    (11, 1.0, 0.9, torch.float32),
    (65, 2.0, 0.5, torch.float64),
    (30, 2.0, 0.999, torch.float64),
    (8, 3.0, 0.2, torch.float64),
    (40, 0.5, 0.05, torch.float32),
)


def _two_token_temperature(z: torch.Tensor, q: float) -> float:
    top2 = z.topk(2).values
    return float((top2[0] - top2[1]) / math.log(q / (1 - q)))


def check_temperature_for(temperature_for) -> None:
    """Exercise 1 (C9.2): ``temperature_for(logits, q)`` returns the temperature T > 0 at which
    the most likely token of softmax(logits / T) has probability q (1/V < q < 1). Tested by
    that property: :func:`top_probability` at the answer's T is q within the grade's tolerance,
    on five sets of logits (V from 8 to 65, q from 0.05 to 0.999, T needed from about 0.03 to
    about 30, float32 and float64). Names the usual mistakes: T <= 0, 1/T, the two-token formula, a search that stopped early
    or went the wrong way."""
    ex = "Exercise 1 (the temperature for a top probability)"
    for i, (V, scale, q, dtype) in enumerate(_TEMPERATURE_CASES):
        logits = (scale * _logits((V,), 80 + i)).to(dtype)
        before = logits.clone()
        name = f"temperature_for(logits [{V}], {q})"
        got = _call(ex, temperature_for, (logits, q), "temperature_for", f"logits [{V}], {q}")
        _unchanged(ex, logits, before, "temperature_for")
        if isinstance(got, float) and math.isinf(got):
            fail(ex, f"{name} returned inf, but a finite T exists (the top probability falls "
                 "from 1 toward 1/V as T grows); the two-token formula (z1 - z2) / ln(q / (1 - q)) "
                 "has no answer at q <= 0.5: the other tokens take their share too.")  # fmt: skip
        T = as_number(ex, got, name=name)
        if T <= 0:
            fail(ex, f"{name} returned {T:.4g}: a temperature is > 0 (T -> 0 is greedy).")
        z = logits.to(torch.float64)
        p_top = top_probability(z, T)
        tol = ATOL + RTOL * q
        if abs(p_top - q) <= tol:
            continue
        if abs(top_probability(z, 1 / T) - q) <= tol:
            fail(ex, f"{name}: the top probability is {q} at 1 / your answer: you returned the "
                 "inverse temperature 1/T; return T itself (softmax(z / T)).")  # fmt: skip
        if abs(T - _two_token_temperature(z, q)) <= 1e-6 * T:
            fail(ex, f"{name} returned the answer for the top two tokens alone; the other "
                 f"{V - 2} tokens take their share of the probability too: at your T the top "
                 f"probability is {p_top:.4f}, not {q}.")  # fmt: skip
        if abs(p_top - q) < 0.01:
            fail(ex, f"{name}: at your T the top probability is {p_top:.6f}, close to {q} but "
                 f"not within {tol:.1e}: search further (halve the interval until it is).")  # fmt: skip
        way = "too low: a larger T flattens" if p_top > q else "too high: a smaller T sharpens"
        fail(ex, f"{name}: at your T = {T:.4g} the top probability is {p_top:.4f}, not {q}; "
             f"your T is {way} the distribution (the top probability falls as T grows).")  # fmt: skip
    passed(
        ex,
        "at your temperatures the most likely token has probability q within "
        f"{ATOL:g} + {RTOL:g} q, for five sets of logits (q from 0.05 to 0.999, T from about "
        "0.03 to about 30, float32 and float64).",
    )


# --- exercise 2 ---------------------------------------------------------------------------------


def _pair_model(seed: int, **options) -> TransformerLM:
    with torch.random.fork_rng():  # seeded, leaving the notebook's random state as it was
        torch.manual_seed(seed)
        # untied, PyTorch's default init: the next-token distributions of such a small untrained
        # model are spread out enough that the greedy pair is often not the most likely one
        model = TransformerLM(11, 16, 2, 2, max_len=24, tie_weights=False, init="torch", **options)
        return model.double().eval()


def _pair_cases():
    """The visible check's (model, prompt) cases: three models, prompts of 1, 3 and 6 ids each
    (tests/test_lesson09_generation.py: on some of them the greedy pair is not the likeliest)."""
    for i, options in enumerate((dict(), dict(positional="learned"), dict(positional="rotary"))):
        model = _pair_model(70 + i, **options)
        g = torch.Generator().manual_seed(80 + i)
        for length in (1, 3, 6):
            yield model, torch.randint(0, model.config.vocab_size, (length,), generator=g)


def pair_log_probs(model: TransformerLM, tokens: torch.Tensor) -> torch.Tensor:
    """Lesson 9, exercise 2 (C9.2). ``[V, V]``: entry (a, b) is
    log p(a | prompt) + log p(b | prompt, a) for the 1-D prompt ``tokens``, each factor the
    softmax of the model's logits at the last position (two forward passes, float64)."""
    with torch.no_grad():
        first = torch.log_softmax(model(tokens[None])[0, -1].double(), dim=-1)  # [V]
        vocab = first.shape[0]
        after = torch.cat([tokens.expand(vocab, -1), torch.arange(vocab)[:, None]], dim=1)
        second = torch.log_softmax(model(after)[:, -1].double(), dim=-1)  # [V, V]: row a
    return first[:, None] + second


def _as_pair(ex: str, got, name: str, vocab: int) -> tuple[int, int]:
    if got is None:
        fail(ex, f"{name} returned None: did you forget to `return` the pair?")
    if isinstance(got, torch.Tensor):
        if got.is_floating_point():
            fail(ex, f"{name} returned {got.dtype} values: return two token ids (whole numbers).")
        if got.numel() == 1:
            fail(ex, f"{name} returned one number: return the two ids (a, b); an index into the "
                     "flattened V x V table is a, b = divmod(index, V).")  # fmt: skip
        got = got.flatten().tolist()
    if isinstance(got, int):
        fail(ex, f"{name} returned one number: return the two ids (a, b); an index into the "
                 "flattened V x V table is a, b = divmod(index, V).")  # fmt: skip
    try:
        pair = list(got)
    except TypeError:
        fail(ex, f"{name} should return two ids (a, b), got a {type(got).__name__}.")
    if len(pair) != 2:
        fail(ex, f"{name} returned {len(pair)} values: return the two ids (a, b).")
    ids = []
    for v in pair:
        v = v.item() if isinstance(v, torch.Tensor) and v.numel() == 1 else v
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < vocab:
            fail(ex, f"{name} returned {pair!r}: each of a and b must be a token id, a whole "
                     f"number in 0..{vocab - 1}.")  # fmt: skip
        ids.append(int(v))
    return ids[0], ids[1]


def check_most_likely_pair(most_likely_pair) -> None:
    """Exercise 2 (C9.2): ``most_likely_pair(model, tokens)`` returns the two ids (a, b) that
    maximize p(a | prompt) p(b | prompt, a) over all V^2 pairs, for a 1-D prompt ``tokens``.
    Tested on small course models (float64, no ties) and nine prompts, among them prompts where
    the greedy pair (the likeliest a, then the likeliest b after it) is not the likeliest pair:
    the answer's pair must have the largest probability (:func:`pair_log_probs`, all pairs
    computed here). A wrong pair is matched against the usual mistakes: greedy, the second step
    alone, logits added without their softmax."""
    ex = "Exercise 2 (the most likely pair)"
    for model, tokens in _pair_cases():
        vocab, length = model.config.vocab_size, len(tokens)
        table = pair_log_probs(model, tokens)  # [V, V]
        with torch.no_grad():
            logits_first = model(tokens[None])[0, -1]  # [V]
            after = torch.cat([tokens.expand(vocab, -1), torch.arange(vocab)[:, None]], 1)
            logits_second = model(after)[:, -1]  # [V, V]
        a0 = int(logits_first.argmax())
        greedy = (a0, int(logits_second[a0].argmax()))
        before = tokens.clone()
        name = f"most_likely_pair(model, tokens of length {length})"
        got = call_described(ex, most_likely_pair, (model, tokens), name="most_likely_pair",
                             shown=f"model, tokens of length {length}")  # fmt: skip
        if not torch.equal(tokens, before):
            fail(ex, f"{name} changed the tokens it was given (in place): build new tensors.")
        a, b = _as_pair(ex, got, name, vocab)
        if table[a, b] >= table.max() - 1e-12:
            continue
        where = f"{name}: another pair is more likely than the one you returned"
        if (a, b) == greedy:
            fail(ex, f"{where}, which is the greedy pair (the likeliest a, then the likeliest "
                     "b after it): a less likely first character can be followed by a much "
                     "likelier second one. Compare p(a) p(b | a) over all pairs.")  # fmt: skip
        if (a, b) == divmod(int((logits_first[:, None] + logits_second).argmax()), vocab):
            fail(ex, f"{where}: you added raw logits; logits are not log-probabilities "
                     "(each step's softmax divides by its own sum). Take log_softmax (or "
                     "softmax) of each step first.")  # fmt: skip
        if (a, b) == divmod(int(logits_second.argmax()), vocab) or (
            (a, b) == divmod(int(torch.log_softmax(logits_second, -1).argmax()), vocab)
        ):
            fail(ex, f"{where}: it is the likeliest second step alone; the probability of "
                     "the pair also holds p(a | prompt).")  # fmt: skip
        fail(ex, f"{where} (all {vocab}^2 pairs searched here): its probability is "
                 f"p(a | prompt) p(b | prompt, a), each factor the softmax of the logits "
                 "at the last position.")  # fmt: skip
    passed(ex, "your pair is the most likely continuation for nine prompts to three models "
               "(sinusoidal, learned, rotary), some of them prompts where greedy decoding picks "
               "another pair.")  # fmt: skip


# --- exercise 3 (transfer): nucleus (top-p) sampling ---------------------------------------------


def check_top_p_filter(top_p_filter) -> None:
    """Exercise 3 (transfer, Holtzman et al. 2020): ``top_p_filter(logits, p)`` returns the
    nucleus probabilities. Tested by the four properties that define them: each row sums to 1;
    the kept tokens' probabilities are softmax(logits)'s, all scaled alike; a kept token is never
    less likely than a dropped one; the kept set reaches p and is the smallest that does
    (without its least likely token it falls below p)."""
    ex = "Exercise 3 (top-p, nucleus, filtering)"
    cases = (
        ((4, 6), 0.02, torch.float64),  # only the most likely token survives
        ((3, 10), 0.9, torch.float64),
        ((12,), 0.5, torch.float64),
        ((2, 16), 0.75, torch.float32),
        ((2, 7), 1.0, torch.float64),
    )
    for i, (shape, p, dtype) in enumerate(cases):
        logits = _logits(shape, 60 + i, dtype)
        before = logits.clone()
        name = f"top_p_filter(logits {list(shape)}, {p})"
        got = _call(ex, top_p_filter, (logits, p), "top_p_filter", f"logits {list(shape)}, {p}")
        _unchanged(ex, logits, before, "top_p_filter")
        if isinstance(got, torch.Tensor) and got.shape == logits.shape and got.is_floating_point():
            if torch.isnan(got).any():
                fail(ex, f"{name} contains NaN: a row probably kept no token (0 / 0 when "
                     "renormalizing); the nucleus always holds the most likely token, and the "
                     "token that takes the sum to p.")  # fmt: skip
            sums = got.detach().to(torch.float64).sum(-1)
            if torch.isfinite(got).all() and (got >= 0).all() and (sums < 1 - 1e-5).any():
                fail(ex, f"{name}: the kept probabilities sum to "
                     f"{float(sums.min()):.4g} in a row, not 1: renormalize them (divide by "
                     "their sum) after dropping the rest.")  # fmt: skip
            if (got == 0).all(dim=-1).any():
                fail(ex, f"{name} keeps no token in a row: the nucleus always holds at least the "
                     "most likely token (keep the token whose probability takes the sum to p).")  # fmt: skip
        got = _probabilities(ex, got, logits, name)
        probs = torch.softmax(logits.to(torch.float64), dim=-1)  # [..., V]
        tol = 1e-4 if dtype == torch.float32 else 1e-8
        for row in range(probs.reshape(-1, shape[-1]).shape[0]):
            q = got.reshape(-1, shape[-1])[row]  # the answer's row
            s = probs.reshape(-1, shape[-1])[row]  # softmax(logits) of that row
            kept = q > 0
            k = int(kept.sum())
            top = s.sort(descending=True).values[:k]  # the most likely k, in sorted order
            in_sorted_order = (
                torch.allclose(q[:k], top / top.sum(), rtol=tol * 10, atol=1e-12)
                and not (q[k:] > 0).any()
            )
            top_set = kept.all() or float(s[kept].min()) >= float(s[~kept].max())
            if in_sorted_order and not (
                top_set and torch.allclose(q[kept] / s[kept], 1 / top.sum())
            ):
                fail(ex, f"{name} returns the probabilities in sorted order: put each back "
                     "at its token's id (scatter with the indices the sort returned).")  # fmt: skip
            scale = q[kept] / s[kept]  # the same factor 1 / (mass kept) for every kept token
            if not torch.allclose(scale, scale.mean().expand_as(scale), rtol=tol * 10, atol=0):
                fail(ex, f"{name}: the kept tokens' probabilities are not softmax(logits)'s all "
                     "scaled by one factor: drop tokens, then renormalize what is left.")  # fmt: skip
            if kept.any() and (~kept).any() and float(s[kept].min()) < float(s[~kept].max()):
                fail(ex, f"{name} keeps a token that is less likely than one it drops: the "
                     "nucleus is made of the most likely tokens (sort in descending order).")  # fmt: skip
            mass = float(s[kept].sum())
            if mass < p - 1e-9:
                fail(ex, f"{name}: the kept tokens hold {mass:.4g} of the probability, less than "
                     f"p = {p}: keep the token that takes the sum to p too (the smallest set "
                     "whose sum reaches p), not only those strictly below it.")  # fmt: skip
            if mass - float(s[kept].min()) >= p:
                fail(ex, f"{name} is not the smallest set: without its least likely token the "
                     f"kept tokens still hold at least p = {p}; stop at the first token that "
                     "takes the sum to p.")  # fmt: skip
    passed(
        ex,
        "each row keeps the most likely tokens, reaches p with the fewest of them, and "
        "renormalizes them to sum to 1, at five values of p from 0.02 to 1.",
    )
