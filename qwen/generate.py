"""Generation: prefill the prompt once, then decode one token at a time, feeding each new token back with the cache.

Each step turns the last position's logits into one token: the argmax (greedy, temperature 0), or a draw from the
softmax after the sampling rules. The presence penalty comes first, as vLLM and OpenAI apply it (transformers has
none); then temperature, top-k, top-p, min-p, the order of transformers' sampling warpers. The cache is what makes
decoding cheap: a full-attention layer keeps its keys and values (growing with the text), a DeltaNet layer its conv
window and fixed-size state, so a step costs one token's work. Generation stops at
a stop token (a chat turn ends with <|im_end|> 248046; the config's eos is <|endoftext|> 248044) or at the limit.
"""
import json
from pathlib import Path

import torch

IM_END, END_OF_TEXT = 248046, 248044  # stop on both: a chat turn ends with the first, a plain text with the second


def checkpoint_stop_tokens(path):
    """<|im_end|>, <|endoftext|>, and every eos the checkpoint's config and generation config name."""
    stop = {IM_END, END_OF_TEXT}
    for name in ("config.json", "generation_config.json"):
        file = Path(path) / name
        if file.is_file():
            raw = json.loads(file.read_text())
            for eos in (raw.get("eos_token_id"), (raw.get("text_config") or {}).get("eos_token_id")):
                stop.update(eos if isinstance(eos, list) else [] if eos is None else [eos])
    return stop


def default_stop(model):
    """stop=None: <|im_end|>, <|endoftext|> and the config's eos (the chat adds the checkpoint's own, see above)."""
    eos = getattr(getattr(model, "cfg", None), "eos_token_id", None)
    return {IM_END, END_OF_TEXT} | set(eos if isinstance(eos, list) else [] if eos is None else [eos])


def filter_logits(logits, temperature=1.0, top_k=None, top_p=None, min_p=None):
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


def next_token(logits, temperature=0.0, top_k=None, top_p=None, min_p=None, generator=None):
    """(B, V) logits -> (B,) token ids: greedy when temperature is 0, else one draw after the rules."""
    if temperature == 0:
        return logits.argmax(-1)
    probs = filter_logits(logits, temperature, top_k, top_p, min_p).softmax(-1)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]


def pad_left(prompts, pad_id=END_OF_TEXT):
    """Lists of ids of different lengths -> (ids (B, T), mask (B, T)): padded on the left, so every prompt ends at
    the last column and the next token of every row is predicted from the same position."""
    T = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_id] * (T - len(p)) + list(p) for p in prompts])
    mask = torch.tensor([[0] * (T - len(p)) + [1] * len(p) for p in prompts])
    return ids, mask


def emitted(token, done, batched):
    """What generate yields for the new tokens (B,): an int for one prompt; for a batch a list of B ints, None for
    the rows that had stopped before this step (done (B,) bool)."""
    return [None if d else int(t) for t, d in zip(token.tolist(), done.tolist())] if batched else int(token)


@torch.no_grad()
def generate(model, input_ids, max_new_tokens, temperature=0.0, top_k=None, top_p=None, stop=None, seed=None,
             min_p=None, presence_penalty=0.0, mask=None, cache=None, speculative=None, draft=None, stats=None,
             pixel_values=None, image_grid_thw=None):
    """Yield new token ids as they are made: ints for one prompt (a list or 1-D tensor); for a (B, T) batch, a list
    of B ints per step, None for rows already stopped. The stop token that ends a row is yielded. stop=None: the
    model's stop tokens; stop=[]: run to max_new_tokens. mask (B, T), 1 = real token, for left-padded batches.
    cache: continue a conversation; it must hold exactly the tokens before input_ids (and mask must cover them).
    speculative=k: k drafted tokens per main-model step (qwen/speculative.py), the same tokens as without for
    temperature 0, the same distribution otherwise; draft: what guesses them (default: the model's MTP head); stats: a
    dict that speculative decoding fills with its counts (main-model steps, guesses proposed and accepted).
    pixel_values, image_grid_thw (qwen.vision.preprocess): images read with the prompt only; the cache keeps the
    M-RoPE offset they leave for the tokens after them."""
    device = next(model.parameters()).device
    ids = torch.as_tensor(input_ids, dtype=torch.long, device=device)
    batched = ids.dim() == 2
    ids = ids if batched else ids[None]  # (B, T)
    if ids.shape[1] == 0:
        raise ValueError("input_ids is empty: generation needs at least one prompt token")
    stop = torch.tensor(sorted(default_stop(model) if stop is None else set(stop)), dtype=torch.long, device=device)
    generator = torch.Generator(device).manual_seed(seed) if seed is not None else None
    mask = None if mask is None else torch.as_tensor(mask, device=device).long()
    cache = model.new_cache() if cache is None else cache
    B = ids.shape[0]
    if speculative and pixel_values is not None:
        raise ValueError("speculative decoding does not take images yet: generate after an image without speculative")
    if speculative:
        from qwen.speculative import Picker, decode  # here, not at the top: qwen/speculative.py imports this file

        if presence_penalty:
            raise ValueError("presence_penalty changes p with every token, drafts included: use it without speculative")
        pick = Picker(temperature, top_k, top_p, min_p, generator)
        yield from decode(model, ids, max_new_tokens, speculative, draft, pick, stop, mask, cache, batched, stats)
        return
    done = torch.zeros(B, dtype=torch.bool, device=device)
    seen = None  # (B, V): tokens this call has generated, for the presence penalty

    images = {} if pixel_values is None else dict(pixel_values=pixel_values, image_grid_thw=image_grid_thw)
    # prefill: the whole prompt at once, its images with it, (B, V)
    logits = model(ids, cache=cache, mask=mask, last_only=True, **images)[:, -1]
    for step in range(max_new_tokens):
        if presence_penalty:  # a flat penalty on every token already generated, however often (OpenAI, vLLM)
            seen = torch.zeros_like(logits, dtype=torch.bool) if seen is None else seen
            logits = logits.float() - presence_penalty * seen
        token = next_token(logits, temperature, top_k, top_p, min_p, generator)  # (B,)
        if seen is not None:
            seen[torch.arange(B, device=device), token] = True
        yield emitted(token, done, batched)
        done |= torch.isin(token, stop)
        if done.all() or step == max_new_tokens - 1:
            return
        if mask is not None:
            mask = torch.cat([mask, mask.new_ones(B, 1)], dim=1)  # (B, S + 1): the new token is real
        logits = model(token[:, None], cache=cache, mask=mask, last_only=True)[:, -1]  # decode: one token, (B, V)


class TextStream:
    """Token ids in, printable text out. A character can span tokens (Chinese takes 3 UTF-8 bytes, an emoji 4, and
    byte-level BPE may split them), so text is held back while its decoding ends in U+FFFD, the mark of an
    incomplete character. The pieces joined equal decode(all ids)."""

    def __init__(self, tokenizer, skip_special_tokens=False):
        self.tokenizer, self.skip = tokenizer, skip_special_tokens
        self.pending = []  # ids since the last character boundary

    def push(self, token_id):
        self.pending.append(token_id)
        text = self.tokenizer.decode(self.pending, skip_special_tokens=self.skip)
        if text.endswith("\ufffd"):
            return ""
        self.pending = []
        return text

    def flush(self):
        """Whatever is still held back (a character the model never finished decodes to U+FFFD)."""
        text = self.tokenizer.decode(self.pending, skip_special_tokens=self.skip)
        self.pending = []
        return text
