"""A conversation with the model, turn by turn: what a chat program keeps between messages (app/chat.py is the one in
the terminal).

Each turn renders the whole conversation with the chat template, but the model only reads what is new: the cache
after "...<|im_start|>assistant\\n" of the last turn is kept, and the next prompt starts with exactly those tokens
(the template drops an old reply's thinking block, never anything before it). So only the new reply's answer, the
user's message and the generation prompt are prefilled; this is exact, the same tokens a fresh prefill would read.
A turn joins the conversation only when its reply ends, at the stop token or at the token limit: a caller that stops
reading a reply early (Ctrl-C) leaves the conversation and the kept cache as they were before the message.
An image attached to the next message goes in as an image content part before its text (qwen/chat.py renders it as
the official template does); its pad becomes one per merged token, the tower (model.visual, loaded by the caller)
reads the pixels with that turn's prefill only, and the cache keeps the M-RoPE offset the image leaves (cache.delta).
Each reply's stats say how many of the prompt's new tokens re-read the previous reply: the template writes an old
reply without its thinking block (empty when thinking is off), so the tokens that follow "<|im_start|>assistant\\n"
are not the ones the cache read after the generation prompt's block, and the reply is read again in its new place.
With a draft (qwen/draft.py) replies are decoded speculatively (qwen/speculative.py): the same replies for greedy
sampling, the same distribution otherwise; the reply's stats then hold the draft's counts, and plain decoding's
speed measured on the same conversation right after it (a few steps on a copy of the cache), to compare.
"""
import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from qwen.chat import END_THINK, default_thinking, render
from qwen.checkpoint import Checkpoint, open_checkpoint
from qwen.draft import Draft
from qwen.generate import TextStream, generate
from qwen.image import ImageSettings, load_image, preprocess
from qwen.lang import tr
from qwen.model import Cache
from qwen.mrope import expand_image_tokens
from qwen.sampling import Sampling, check
from qwen.speculative import speculate
from qwen.tokenizer import Tokenizer


class Session:
    """The conversation, and the cache of everything in it up to the start of the last reply. checkpoint: the one the
    model was loaded from (qwen/checkpoint.py; or its folder, opened here): its stop ids end a reply, its image
    settings read a picture, its template says whether it thinks by default (thinking=None). overrides: Sampling
    fields that replace the model card's (qwen.sampling.CARD) for every turn; a seed is offset per turn."""

    def __init__(self, model: torch.nn.Module, tokenizer: Tokenizer, checkpoint: Checkpoint | str | Path,
                 thinking: bool | None = None, overrides: dict | None = None, max_new_tokens: int = 1024,
                 system: str | None = None, draft: Draft | None = None) -> None:
        self.max_new_tokens = check("max_new_tokens", max_new_tokens)  # bad limits are refused here, at once,
        self.checkpoint = open_checkpoint(checkpoint)
        self.model, self.tok, self.stop = model, tokenizer, self.checkpoint.stop
        self.thinking = default_thinking(self.checkpoint) if thinking is None else thinking
        self.overrides = overrides or {}
        self.sampling()  # and overrides the card's settings cannot take, not at the first reply
        self.system, self.draft = system, draft  # draft: None for plain decoding
        self.end_think, self.im_start = tokenizer.special_tokens[END_THINK], tokenizer.special_tokens["<|im_start|>"]
        self.reset()

    def reset(self) -> None:
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": self.system}] if self.system else []
        self.kept_ids: list[int] = []  # tokens the kept cache has read
        self.kept_cache: Cache | None = None
        self.stats: dict[str, Any] | None = None  # the last finished reply's numbers
        # {"path", "pixel_values", "image_grid_thw"} of each image in self.messages, in order
        self.images: list[dict[str, Any]] = []
        self.pending: list[dict[str, Any]] = []  # images attached to the next message

    def sampling(self) -> Sampling:
        """This turn's settings: the model card's for the current mode, with the overrides."""
        return Sampling.card(self.thinking).but(**self.overrides)

    def attach(self, path: str | Path, settings: ImageSettings | None = None) -> tuple[tuple[int, int], torch.Tensor]:
        """Read the image file at `path` for the next message, resized with `settings` (None: the checkpoint's,
        checkpoint.image). Returns (its size (w, h), image_grid_thw). The tower must be loaded."""
        if self.draft is not None:
            raise ValueError(tr("images cannot go with a draft: this course's speculative decoding "
                                "(qwen/speculative.py) takes text only; use a session without one",
                                "带草稿模型的会话不能附图片：本课程的投机解码（qwen/speculative.py）只接受文本；"
                                "请换用不带草稿模型的会话"))
        if self.model.visual is None:
            raise ValueError(tr("the model has no vision tower loaded: "
                                "`model.visual = qwen.vision.load_vision(checkpoint)` first",
                                "模型还没有加载视觉塔：先运行 `model.visual = qwen.vision.load_vision(checkpoint)`"))
        file = Path(path).expanduser()
        if not file.is_file():
            if file.is_dir():
                raise FileNotFoundError(tr(f"no image file at {file} (that is a folder)",
                                           f"{file} 处没有图片文件（那是一个文件夹）"))
            raise FileNotFoundError(tr(f"no image file at {file}", f"{file} 处没有图片文件"))
        image = load_image(file)
        pixels, grid = preprocess(image, settings or self.checkpoint.image)  # (N, 3·2·16·16), [[1, gh, gw]]
        self.pending.append(dict(path=str(file), size=image.size, pixel_values=pixels, image_grid_thw=grid))
        return image.size, grid

    def drop_pending(self) -> int:
        """Forget the images attached to the next message; returns how many there were."""
        dropped, self.pending = len(self.pending), []
        return dropped

    def expand(self, ids, images):
        """The rendered ids with each image's one <|image_pad|> repeated once per merged token."""
        if not images:
            return ids
        cfg = self.model.visual.cfg
        grids = torch.cat([i["image_grid_thw"] for i in images])
        return expand_image_tokens(ids, grids, cfg.image_token_id, cfg.spatial_merge_size)

    def respond(self, text: str) -> Iterator[tuple[str, str]]:
        """Yield (part, text) pieces of the reply to `text`, part "think" or "answer". Only a reply that ends (its
        stop token, or the token limit: then self.stats["cut"]) joins the conversation, with the message, and sets
        self.stats; a caller that stops early (Ctrl-C) leaves the conversation and the cache as they were, and
        self.stats None."""
        self.stats = None
        parts = [{"type": "image", "image": i["path"]} for i in self.pending]  # images first, as Qwen's examples
        content = parts + [{"type": "text", "text": text}] if parts else text
        messages = self.messages + [{"role": "user", "content": content}]  # new lists: self.messages and
        images = self.images + self.pending  # self.images stay as they are until the turn joins
        stable = render(messages, add_generation_prompt=False) + "<|im_start|>assistant\n"
        ids = self.expand(self.tok.encode(stable), images)
        rest = self.tok.encode(render(messages, thinking=self.thinking)[len(stable):])  # the thinking tags
        device = next(self.model.parameters()).device
        start = time.perf_counter()
        reuse = self.kept_cache is not None and ids[:len(self.kept_ids)] == self.kept_ids
        cache = copy.deepcopy(self.kept_cache) if reuse else self.model.new_cache()  # type: ignore[operator]
        new = ids[len(self.kept_ids):] if reuse else ids
        starts = [i for i, t in enumerate(ids) if t == self.im_start]  # the last two: the reply's turn, the user's
        reread = max(0, starts[-2] - len(self.kept_ids)) if reuse and len(starts) > 1 else 0  # the reply's tokens
        unread = self.pending if reuse else images  # the kept cache has read every earlier message's images
        pixels = {} if not unread else dict(pixel_values=torch.cat([i["pixel_values"] for i in unread]),
                                            image_grid_thw=torch.cat([i["image_grid_thw"] for i in unread]))
        with torch.no_grad():  # the images' offset of M-RoPE positions stays in cache.delta for every later token
            self.model(torch.tensor([new], device=device), cache=cache, last_only=True, **pixels)
        kept = copy.deepcopy(cache)  # before the reply: the next turn starts here

        reply, part, ended, first = [], "think" if self.thinking else "answer", False, None
        prefill_s = 0.0  # set when the first token comes (a call that makes none has no prefill time to report)
        stream = TextStream(self.tok)
        sampling = self.sampling()
        if sampling.seed is not None:  # reproducible, yet not every turn alike (in a seed's 64 bits: RANGES)
            sampling = sampling.but(seed=(sampling.seed + len(messages)) % 2 ** 64)
        if self.draft is None:
            tokens = generate(self.model, rest, self.max_new_tokens, sampling, self.stop, cache=cache)
        else:
            tokens = speculate(self.model, rest, self.max_new_tokens, self.draft, sampling,  # type: ignore[arg-type]
                               self.stop, cache=cache)
        for token in tokens:
            if first is None:
                prefill_s, first = time.perf_counter() - start, time.perf_counter()
            if token in self.stop:
                ended = True
                break
            reply.append(token)
            if token == self.end_think:  # the reasoning is over; what follows is the answer
                yield part, stream.flush()
                part = "answer"
                continue
            piece = stream.push(token)  # type: ignore[arg-type]  # (an int: one prompt)
            if piece:
                yield part, piece
        yield part, stream.flush()

        count = len(reply) + ended
        stats = dict(prompt=len(new) + len(rest), reused=len(ids) - len(new), reread=reread, tokens=count,
                     prefill_s=prefill_s,
                     cut=not ended, cut_thinking=not ended and part == "think",
                     image_tokens=new.count(self.model.visual.cfg.image_token_id) if unread else 0)  # type: ignore[union-attr]
        if count > 1 and first is not None:  # (the first token set `first`)
            stats["decode_tok_s"] = (count - 1) / (time.perf_counter() - first)
        if self.draft is not None and self.draft.counts["steps"]:  # the prefill made the first token; each verify
            stats.update(self.draft.counts, per_step=(count - 1) / self.draft.counts["steps"])  # step the rest
        message = self.reply_message(reply)
        # the turn joins in one assignment, new lists and cache: nothing of it shows until it is all there
        self.messages, self.kept_ids, self.kept_cache, self.stats = messages + [message], ids, kept, stats
        self.images, self.pending = images, []
        if "steps" in stats:  # after the join: a Ctrl-C here leaves the finished turn in place
            stats["plain_tok_s"] = self.plain_speed(copy.deepcopy(kept), rest, sampling)

    def plain_speed(self, cache, rest, sampling, steps=8):
        """Tokens/s of plain decoding here and now: `steps` decode steps after `rest` on `cache` (a copy of this
        turn's), the number a speculative turn's speed is compared with."""
        tokens = generate(self.model, rest, steps + 1, sampling, stop=[], cache=cache)
        next(tokens)  # the token of the prefill
        start = time.perf_counter()
        for _ in tokens:
            pass
        return steps / (time.perf_counter() - start)

    def reply_message(self, reply):
        """The reply as the conversation keeps it. Thinking, the reasoning (up to </think>) goes in its own field,
        reasoning_content, which the template reads (and OpenAI-style servers for Qwen return): a reply the token
        limit cut before </think> keeps an empty answer, not its half reasoning passed off as the answer. Later
        prompts keep only the answer, as the template does."""
        if not self.thinking:
            return {"role": "assistant", "content": self.tok.decode(reply)}
        end = reply.index(self.end_think) if self.end_think in reply else len(reply)
        return {"role": "assistant", "content": self.tok.decode(reply[end + 1:]),
                "reasoning_content": self.tok.decode(reply[:end])}
