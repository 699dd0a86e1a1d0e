"""Generation: prefill the prompt once, then decode one token at a time, feeding each new token back with the cache.

Each step turns the last position's logits into one token: the argmax (greedy, temperature 0), or a draw from the
softmax after the sampling rules (qwen/sampling.py: the presence penalty, then temperature, top-k, top-p, min-p).
The cache is what makes decoding cheap: a full-attention layer keeps its
keys and values (growing with the text), a DeltaNet layer its conv window and fixed-size state, so a step costs one
token's work. Generation stops at a stop token (a chat turn ends with <|im_end|> 248046; the config's eos is
<|endoftext|> 248044) or at the limit.
"""
from collections.abc import Iterable, Iterator

import torch

from qwen.config import END_OF_TEXT, IM_END
from qwen.model import Cache
from qwen.sampling import Picker, Sampling, check, emitted, penalise
from qwen.tokenizer import Tokenizer


def default_stop(model):
    """stop=None: <|im_end|>, <|endoftext|> and the config's eos (the chat passes the checkpoint's: checkpoint.stop,
    qwen/checkpoint.py)."""
    eos = getattr(getattr(model, "cfg", None), "eos_token_id", None)
    return {IM_END, END_OF_TEXT} | set(eos if isinstance(eos, list) else [] if eos is None else [eos])


def pad_left(prompts: list[list[int]], pad_id: int = END_OF_TEXT) -> tuple[torch.Tensor, torch.Tensor]:
    """Lists of ids of different lengths -> (ids (B, T), mask (B, T)): padded on the left, so every prompt ends at
    the last column and the next token of every row is predicted from the same position."""
    T = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_id] * (T - len(p)) + list(p) for p in prompts])
    mask = torch.tensor([[0] * (T - len(p)) + [1] * len(p) for p in prompts])
    return ids, mask


def prepare(model, input_ids, stop, mask, cache):
    """What a generation loop starts from: ids (B, T) on the model's device, whether the input was a batch, the stop
    ids as a tensor (stop=None: the model's), the mask (B, S) or None, and the cache (a new one for None)."""
    device = next(model.parameters()).device
    ids = torch.as_tensor(input_ids, dtype=torch.long, device=device)
    batched = ids.dim() == 2
    ids = ids if batched else ids[None]  # (B, T)
    if ids.shape[1] == 0:
        raise ValueError("input_ids is empty: generation needs at least one prompt token")
    stop = torch.tensor(sorted(default_stop(model) if stop is None else set(stop)), dtype=torch.long, device=device)
    mask = None if mask is None else torch.as_tensor(mask, device=device).long()
    return ids, batched, stop, mask, model.new_cache() if cache is None else cache


def generate(model: torch.nn.Module, input_ids: torch.Tensor | list[int] | list[list[int]], max_new_tokens: int,
             sampling: Sampling | None = None, stop: Iterable[int] | None = None,
             mask: torch.Tensor | None = None, cache: Cache | None = None,
             images: tuple[torch.Tensor, torch.Tensor] | None = None) -> Iterator[int | list[int | None]]:
    """Yield new token ids as they are made: ints for one prompt (a list or 1-D tensor); for a (B, T) batch, a list
    of B ints per step, None for rows already stopped. The stop token that ends a row is yielded.
    sampling: the rules and seed (qwen/sampling.py); None is greedy. stop=None: the model's stop tokens; stop=[]: run
    to max_new_tokens. mask (B, T), 1 = real token, for left-padded batches. cache: continue a conversation; it must
    hold exactly the tokens before input_ids (and mask must cover them). images: (pixel_values, image_grid_thw) as
    qwen.image.preprocess returns them (several images: each concatenated along dim 0), read with the prompt only;
    the cache keeps the M-RoPE offset they leave for the tokens after them. Speculative decoding has its own loop,
    qwen.speculative.speculate.
    No gradients are kept. Without a cache the call runs under torch.inference_mode, which also skips autograd's
    bookkeeping on every op (2 to 5 % of a decode step measured on the 0.8B's shapes); its tensors cannot be changed
    in place outside that mode, so a cache the caller passes, which the caller may use again, runs under no_grad."""
    mode = torch.inference_mode() if cache is None else torch.no_grad()
    return mode(_generate)(model, input_ids, max_new_tokens, sampling, stop, mask, cache, images)


def _generate(model: torch.nn.Module, input_ids: torch.Tensor | list[int] | list[list[int]], max_new_tokens: int,
              sampling: Sampling | None, stop: Iterable[int] | None, mask: torch.Tensor | None, cache: Cache | None,
              images: tuple[torch.Tensor, torch.Tensor] | None) -> Iterator[int | list[int | None]]:  # generate's loop
    check("max_new_tokens", max_new_tokens)  # at the first next(), before the prefill
    ids, batched, stop, mask, cache = prepare(model, input_ids, stop, mask, cache)
    B, device = ids.shape[0], ids.device
    pick = Picker(sampling, device)
    penalty = pick.sampling.presence_penalty
    done = torch.zeros(B, dtype=torch.bool, device=device)
    pixels = {} if images is None else dict(pixel_values=images[0], image_grid_thw=images[1])
    # prefill: the whole prompt at once, its images with it, (B, V)
    logits = model(ids, cache=cache, mask=mask, last_only=True, **pixels)[:, -1]
    seen = torch.zeros_like(logits, dtype=torch.bool) if penalty else None  # (B, V): generated by this call
    for step in range(max_new_tokens):
        if seen is not None:  # a presence penalty
            logits = penalise(logits, seen, penalty)
        token, _ = pick(logits)  # (B,)
        if seen is not None:
            seen[torch.arange(B, device=device), token] = True
        yield emitted(token, done, batched)
        done |= torch.isin(token, stop)  # type: ignore[arg-type]  # (stop: the tensor prepare made of it)
        if done.all() or step == max_new_tokens - 1:
            return
        if mask is not None:
            mask = torch.cat([mask, mask.new_ones(B, 1)], dim=1)  # (B, S + 1): the new token is real
        logits = model(token[:, None], cache=cache, mask=mask, last_only=True)[:, -1]  # decode: one token, (B, V)


class TextStream:
    """Token ids in, printable text out. A character can span tokens (Chinese takes 3 UTF-8 bytes, an emoji 4, and
    byte-level BPE may split them), so text is held back while its decoding ends in U+FFFD, the mark of an
    incomplete character. The pieces joined equal decode(all ids)."""

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = False) -> None:
        self.tokenizer, self.skip = tokenizer, skip_special_tokens
        self.pending: list[int] = []  # ids since the last character boundary

    def push(self, token_id: int) -> str:
        self.pending.append(token_id)
        text = self.tokenizer.decode(self.pending, skip_special_tokens=self.skip)
        if text.endswith("\ufffd"):
            return ""
        self.pending = []
        return text

    def flush(self) -> str:
        """Whatever is still held back (a character the model never finished decodes to U+FFFD)."""
        text = self.tokenizer.decode(self.pending, skip_special_tokens=self.skip)
        self.pending = []
        return text
