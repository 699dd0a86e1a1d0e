"""Sampling: how one step's logits become the next token, shared by plain decoding (qwen/generate.py) and
speculative decoding (qwen/speculative.py).

The rules reshape the distribution before the draw. The presence penalty comes first, as vLLM and OpenAI apply it
(transformers has none): a flat penalty on every token this call has already generated, once however often, never on
the prompt. Then temperature, top-k, top-p, min-p, the order of transformers' sampling warpers. Cut tokens get logit
-inf and one softmax at the end renormalises what survives. Temperature 0 is greedy, the argmax: the default.
`Sampling` holds one call's settings; `Sampling.card(thinking)` is the model card's recommendation for Qwen3.5.
Each setting is checked when a Sampling is made, against RANGES: the one table of what a generation's numbers may
be, which the session, the generation loops and the chat's options read too. A value outside its range would not
fail loudly later: a negative temperature flips the distribution (the least likely token wins), top_p 0 cuts every
token (NaN probabilities), top_k 0 asks for the 0th largest logit.
"""
import math
import operator
from dataclasses import dataclass, fields, replace
from numbers import Integral, Real
from typing import Any

import torch

from qwen.lang import tr

# The model card's recommended settings for text, per mode (Qwen/Qwen3.5-0.8B and larger); "precise coding" with
# thinking: temperature 0.6 and no presence penalty
CARD = {False: dict(temperature=1.0, top_p=1.0, top_k=20, min_p=0.0, presence_penalty=2.0),
        True: dict(temperature=1.0, top_p=0.95, top_k=20, min_p=0.0, presence_penalty=1.5)}


@dataclass(frozen=True)
class Range:
    """The values one setting may take: finite numbers (whole ones when `whole`) from `low` to `high`, both
    included unless `low_open` (None: no bound that side); None as well when `off` (the rule is then not applied)."""
    low: int | None = None
    high: int | None = None
    low_open: bool = False
    whole: bool = False
    off: bool = False

    def holds(self, value) -> bool:
        if value is None:
            return self.off
        if isinstance(value, bool) or not isinstance(value, Integral if self.whole else Real):
            return False
        number: float = operator.index(value) if isinstance(value, Integral) else float(value)  # exact when whole
        above = self.low is None or number > self.low or (number == self.low and not self.low_open)
        below = self.high is None or number <= self.high
        return (isinstance(number, int) or math.isfinite(number)) and above and below  # an int is finite, maybe huge

    def words(self) -> str:
        """The range in words (None left out: a command line has no None)."""
        if self.high is not None:
            span = f"{'(' if self.low_open else '['}{self.low}, {self.high}]"
            return tr(f"a whole number in {span}", f"区间 {span} 内的整数") if self.whole else \
                tr(f"a number in {span}", f"区间 {span} 内的数")
        if self.low is not None:
            return tr(f"a whole number of at least {self.low}", f"不小于 {self.low} 的整数") if self.whole else \
                tr(f"a number of at least {self.low}", f"不小于 {self.low} 的数")
        return tr("a finite number", "有限的数")


# The ranges of the sampling rules are those transformers' warpers check (TopK: k ≥ 1, TopP: 0 < p ≤ 1, MinP:
# 0 ≤ p ≤ 1), with temperature 0 meaning greedy here; None switches top-k, top-p and min-p off. max_new_tokens: at
# least one new token, as transformers' generate asks; k: a draft's guesses per step (qwen/draft.py); seed: what a
# torch.Generator takes, 64 bits (None: no seed, a fresh draw each call).
RANGES = {"temperature": Range(low=0), "top_k": Range(low=1, whole=True, off=True),
          "top_p": Range(low=0, high=1, low_open=True, off=True), "min_p": Range(low=0, high=1, off=True),
          "presence_penalty": Range(), "max_new_tokens": Range(low=1, whole=True), "k": Range(low=1, whole=True),
          "seed": Range(low=0, high=2 ** 64 - 1, whole=True, off=True)}


def check(name: str, value):
    """`value`, if the setting `name` may take it (RANGES); else one ValueError naming the setting, the value and
    its range."""
    allowed = RANGES[name]
    if not allowed.holds(value):
        off = tr(", nor None (off)", "，也不是 None（不启用）") if allowed.off else ""
        raise ValueError(tr(f"{name}={value!r} is not {allowed.words()}{off}",
                            f"{name}={value!r} 不是{allowed.words()}{off}"))
    return value


@dataclass(frozen=True)
class Sampling:
    """One call's sampling settings. The defaults are greedy decoding; a seed makes a draw repeatable."""
    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    presence_penalty: float = 0.0
    seed: int | None = None

    def __post_init__(self):  # every way of making one comes here: the constructor, card, but
        for field in fields(self):
            if field.name in RANGES:
                check(field.name, getattr(self, field.name))

    @classmethod
    def card(cls, thinking: bool, **changes: Any) -> "Sampling":
        """The model card's settings for thinking on or off; `changes` replace some (e.g. seed=1)."""
        return cls(**{**CARD[bool(thinking)], **changes})

    def but(self, **changes: Any) -> "Sampling":
        """A copy with some settings changed; a change of None keeps the setting (as an unset option would)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def filter_logits(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                  top_p: float | None = None, min_p: float | None = None) -> torch.Tensor:
    """(B, V) logits -> (B, V) fp32 logits with every token the rules cut set to -inf. Nothing is renormalised here:
    softmax does that afterwards, over the survivors only."""
    logits = logits.float() / temperature  # temperature scales logits, before softmax: T<1 sharpens, T>1 flattens
    if top_k is not None and top_k < logits.shape[-1]:
        kth = logits.topk(top_k).values[..., -1:]  # (B, 1): the k-th largest logit
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        p, order = logits.softmax(-1).sort(-1, descending=True)
        above = p.cumsum(-1) - p  # probability mass ranked strictly above each token
        cut = above >= top_p  # keep tokens until the kept mass reaches top_p, the one crossing it included
        logits = logits.masked_fill(cut.scatter(-1, order, cut), float("-inf"))
    if min_p is not None and min_p > 0:
        p = logits.softmax(-1)
        logits = logits.masked_fill(p < min_p * p.max(-1, keepdim=True).values, float("-inf"))
    return logits


def penalise(logits: torch.Tensor, generated: torch.Tensor, penalty: float) -> torch.Tensor:
    """(B, V) logits minus `penalty` wherever generated (B, V) bool is set: the tokens this call has produced, each
    once however often (presence, not frequency), never the prompt's. Returns fp32."""
    return logits.float() - penalty * generated


class Picker:
    """The sampling rules of one call: logits (B, V) -> token (B,) and the distribution it was drawn from (B, V),
    None for greedy. It owns the call's random generator, so a seed makes the whole call repeatable."""

    def __init__(self, sampling: Sampling | None = None, device: torch.device | str = "cpu"):
        self.sampling = sampling = sampling or Sampling()
        self.greedy = sampling.greedy
        self.rules = (sampling.temperature, sampling.top_k, sampling.top_p, sampling.min_p)
        self.generator = None if sampling.seed is None else torch.Generator(device).manual_seed(sampling.seed)

    def probs(self, logits: torch.Tensor) -> torch.Tensor:  # (..., V) -> (..., V) fp32: softmax after the rules
        shape = logits.shape
        return filter_logits(logits.reshape(-1, shape[-1]), *self.rules).softmax(-1).reshape(shape)

    def draw(self, probs: torch.Tensor) -> torch.Tensor:  # (B, V) -> (B,)
        return torch.multinomial(probs, 1, generator=self.generator)[:, 0]

    def __call__(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.greedy:
            return logits.argmax(-1), None
        probs = self.probs(logits)
        return self.draw(probs), probs


def emitted(token: torch.Tensor, done: torch.Tensor, batched: bool) -> int | list[int | None]:
    """What a generation loop yields for the new tokens (B,): an int for one prompt; for a batch a list of B ints,
    None for the rows that had stopped before this step (done (B,) bool)."""
    if not batched:
        return int(token)
    return [None if d else int(t) for t, d in zip(token.tolist(), done.tolist(), strict=True)]
