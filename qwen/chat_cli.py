"""A terminal chat with the hand-written model: streamed replies, several turns, thinking on or off.

Each turn renders the whole conversation with the chat template, but the model only reads what is new: the cache
after "...<|im_start|>assistant\\n" of the last turn is kept, and the next prompt starts with exactly those tokens
(the template drops an old reply's thinking block, never anything before it). So only the new reply's answer, the
user's message and the generation prompt are prefilled; this is exact, the same tokens a fresh prefill would read.
Run: python main.py chat [--model synthetic] (or bash course.sh chat); /reset, /think on|off|hide, /quit.
"""
import argparse
import copy
import sys
import time

import torch

from qwen.chat import END_THINK, default_thinking, render
from qwen.course import open_model, pick_device
from qwen.generate import TextStream, checkpoint_stop_tokens, generate
from qwen.synthetic import is_synthetic
from qwen.tokenizer import load_tokenizer

# The model card's recommended sampling settings for text, per mode (Qwen/Qwen3.5-0.8B and larger).
CARD = {False: dict(temperature=1.0, top_p=1.0, top_k=20, min_p=0.0, presence_penalty=2.0),
        True: dict(temperature=1.0, top_p=0.95, top_k=20, min_p=0.0, presence_penalty=1.5)}
HELP = "commands: /reset (new conversation), /think on|off|hide, /quit (or Ctrl-D). Ctrl-C stops a reply."


class Chat:
    """The conversation, and the cache of everything in it up to the start of the last reply."""

    def __init__(self, model, tokenizer, stop, thinking=False, overrides=None, max_new_tokens=1024, seed=None,
                 system=None):
        self.model, self.tok, self.stop = model, tokenizer, stop
        self.thinking, self.overrides, self.max_new_tokens, self.seed = thinking, overrides or {}, max_new_tokens, seed
        self.system = system
        self.end_think = tokenizer.special_tokens[END_THINK]
        self.reset()

    def reset(self):
        self.messages = [{"role": "system", "content": self.system}] if self.system else []
        self.kept_ids, self.kept_cache = [], None  # tokens the kept cache has read

    def settings(self):
        return {**CARD[self.thinking], **{k: v for k, v in self.overrides.items() if v is not None}}

    def respond(self, text):
        """Yield (part, text) pieces of the reply, part "think" or "answer"; the reply joins the conversation even
        when the caller stops early (Ctrl-C). self.stats says how long it took."""
        self.messages.append({"role": "user", "content": text})
        stable = render(self.messages, add_generation_prompt=False) + "<|im_start|>assistant\n"
        ids = self.tok.encode(stable)
        rest = self.tok.encode(render(self.messages, thinking=self.thinking)[len(stable):])  # the thinking tags
        device = next(self.model.parameters()).device
        start = time.perf_counter()
        reuse = self.kept_cache is not None and ids[:len(self.kept_ids)] == self.kept_ids
        cache = copy.deepcopy(self.kept_cache) if reuse else self.model.new_cache()
        new = ids[len(self.kept_ids):] if reuse else ids
        with torch.no_grad():
            self.model(torch.tensor([new], device=device), cache=cache, last_only=True)
        self.kept_ids, self.kept_cache = ids, copy.deepcopy(cache)  # before the reply: the next turn starts here

        reply, part = [], "think" if self.thinking else "answer"
        stream = TextStream(self.tok)
        self.stats = dict(prompt=len(new) + len(rest), reused=len(ids) - len(new), tokens=0)
        seed = None if self.seed is None else self.seed + len(self.messages)  # reproducible, yet not every turn alike
        try:
            for i, token in enumerate(generate(self.model, rest, self.max_new_tokens, stop=self.stop, seed=seed,
                                               cache=cache, **self.settings())):
                if i == 0:
                    self.stats["prefill_s"], first = time.perf_counter() - start, time.perf_counter()
                self.stats["tokens"] = i + 1
                if token in self.stop:
                    break
                reply.append(token)
                if token == self.end_think:  # the reasoning is over; what follows is the answer
                    yield part, stream.flush()
                    part = "answer"
                    continue
                piece = stream.push(token)
                if piece:
                    yield part, piece
            yield part, stream.flush()
        finally:  # also on Ctrl-C: keep what was said
            self.messages.append({"role": "assistant", "content": self.tok.decode(reply)})
            if self.stats["tokens"] > 1:
                self.stats["decode_tok_s"] = (self.stats["tokens"] - 1) / (time.perf_counter() - first)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Chat with the hand-written Qwen3.5 in the terminal. " + HELP)
    p.add_argument("--model", help="checkpoint folder, hub id (default Qwen/Qwen3.5-0.8B), size or 'synthetic'")
    p.add_argument("--device", help="cpu, cuda or mps (default: the fastest available)")
    p.add_argument("--dtype", choices=["bf16", "fp32", "fp16"],
                   help="default: the checkpoint's (bf16). On a CPU without bf16 instructions the fast path multiplies "
                        "prompts in fp32 and decodes in bf16, half the bytes of fp32 per token")
    p.add_argument("--think", action=argparse.BooleanOptionalAction, default=None,
                   help="start with thinking on/off (default: the checkpoint's: off for 0.8B and 2B, on for 4B+)")
    p.add_argument("--hide-thinking", action="store_true", help="think, but do not print the reasoning")
    p.add_argument("--system", help="a system message for the whole conversation")
    p.add_argument("--max-new-tokens", type=int, help="reply length limit (default 1024; 48 on the synthetic one)")
    p.add_argument("--seed", type=int, help="make the sampling reproducible")
    for name, kind in (("temperature", float), ("top-p", float), ("top-k", int), ("min-p", float),
                       ("presence-penalty", float)):
        p.add_argument(f"--{name}", type=kind, help=f"override the model card's {name} "
                                                    f"(no thinking / thinking: {CARD[False][name.replace('-', '_')]}"
                                                    f" / {CARD[True][name.replace('-', '_')]})")
    return p.parse_args(argv)


def main(argv=None):
    from qwen.fast import Fast
    from qwen.model import load_model

    args = parse_args(argv)
    try:
        path = open_model(args.model)
        tok = load_tokenizer(path)
        device = torch.device(args.device) if args.device else pick_device()
        model = Fast(load_model(path, dtype=args.dtype, device=device))  # the fast path: same results (chapter 9)
    except (FileNotFoundError, ValueError) as e:
        sys.exit(f"error: {e}")
    synthetic = is_synthetic(path)
    if synthetic:
        print("synthetic checkpoint: its weights are random, so every reply is random tokens. The code path is the "
              "real one; load the real model with --model Qwen/Qwen3.5-0.8B to talk.")
    thinking = default_thinking(path) if args.think is None else args.think
    overrides = {k: getattr(args, k) for k in CARD[False]}
    chat = Chat(model, tok, checkpoint_stop_tokens(path), thinking or args.hide_thinking, overrides,
                args.max_new_tokens or (48 if synthetic else 1024), args.seed, args.system)
    show = "hide" if args.hide_thinking else "dim"
    dim, plain = ("\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "")
    print(f"{path.name} on {device} in {next(model.parameters()).dtype}, thinking {'on' if chat.thinking else 'off'}. {HELP}")
    while True:
        try:
            line = input("\nyou> ")
        except EOFError:
            print("\nbye")
            return
        except KeyboardInterrupt:
            print("\n(Ctrl-D or /quit leaves)")
            continue
        line = line.strip()
        if not line:
            continue
        if line in ("/quit", "/exit"):
            print("bye")
            return
        if line == "/reset":
            chat.reset()
            print("(new conversation)")
            continue
        if line.startswith("/think"):
            mode = line.split()[1] if len(line.split()) == 2 else ""
            if mode not in ("on", "off", "hide"):
                print("usage: /think on | off | hide (think without printing the reasoning)")
                continue
            chat.thinking, show = mode != "off", "hide" if mode == "hide" else "dim"
            print(f"(thinking {mode}; sampling {chat.settings()})")
            continue
        if line.startswith("/"):
            print(f"unknown command {line.split()[0]}. {HELP}")
            continue
        print("qwen> ", end="", flush=True)
        try:
            for part, piece in chat.respond(line):
                if part == "think" and show == "hide":
                    continue
                print(f"{dim}{piece}{plain}" if part == "think" else piece, end="", flush=True)
        except KeyboardInterrupt:
            print(" [stopped]", end="")
        s = chat.stats
        speed = f", {s['decode_tok_s']:.1f} tokens/s" if "decode_tok_s" in s else ""
        print(f"\n[{s['tokens']} tokens{speed}; prompt: {s['prompt']} new tokens in {s.get('prefill_s', 0):.2f} s, "
              f"{s['reused']} read from the cache]")


if __name__ == "__main__":
    main()
