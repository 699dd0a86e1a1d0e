"""A terminal chat with the hand-written model: streamed replies, several turns, thinking on or off.

Each turn renders the whole conversation with the chat template, but the model only reads what is new: the cache
after "...<|im_start|>assistant\\n" of the last turn is kept, and the next prompt starts with exactly those tokens
(the template drops an old reply's thinking block, never anything before it). So only the new reply's answer, the
user's message and the generation prompt are prefilled; this is exact, the same tokens a fresh prefill would read.

A turn joins the conversation only when its reply ends, at the stop token or at the token limit. Ctrl-C at any
moment, the prefill included, leaves the conversation and the kept cache as they were before the message.
Typing goes through readline where Python has it: arrow keys edit and recall, a line may be of any length (the
terminal's own line editor stops at 4,095 characters on Linux), and with GNU readline 8.1 or later a paste of
several lines arrives as one message (bracketed paste). Everywhere, a message may span the lines between two lines
of three double quotes.
/image PATH attaches a picture to the next message, as an image content part before its text (qwen/chat.py renders
it as the official template does: <|vision_start|><|image_pad|><|vision_end|>). The pad becomes one per merged token
(qwen/mrope.py), the tower reads the pixels with that turn's prefill only, and the cache keeps the M-RoPE offset the
image leaves (cache.delta): later turns read only their new tokens, exactly as a fresh read of the conversation.
--speculative K decodes with the checkpoint's multi-token-prediction head drafting K tokens per main-model step
(qwen/speculative.py): the same replies at temperature 0, the same distribution otherwise; after each reply the chat
prints the share of guesses the main model accepted and the tokens each main-model step produced. The model card's
presence penalty goes off with it (one line says so): it changes the distribution with every token, drafts included.
Run: python main.py chat [--model synthetic] (or bash course.sh chat); in the chat, /help lists the commands.
"""
import argparse
import copy
import re
import shlex
import sys
import time
from pathlib import Path

import torch

from qwen.chat import END_THINK, default_thinking, render
from qwen.course import open_model, pick_device
from qwen.generate import TextStream, checkpoint_stop_tokens, generate
from qwen.image import ImageSettings, load_image, preprocess
from qwen.mrope import expand_image_tokens, tokens_per_image
from qwen.synthetic import is_synthetic
from qwen.tokenizer import load_tokenizer
from qwen.vision import load_vision

# The model card's recommended sampling settings for text, per mode (Qwen/Qwen3.5-0.8B and larger).
CARD = {False: dict(temperature=1.0, top_p=1.0, top_k=20, min_p=0.0, presence_penalty=2.0),
        True: dict(temperature=1.0, top_p=0.95, top_k=20, min_p=0.0, presence_penalty=1.5)}
COMMANDS = "/reset, /think on|off|hide, /limit N, /history, /image PATH, /help, /quit"
BLOCK = '"""'  # a line of its own opens and closes a message of several lines
PADS = ("<|image_pad|>", "<|video_pad|>")  # stand for an image's (a video's) tokens: only /image writes them
DTYPES = {torch.bfloat16: "bf16", torch.float32: "fp32", torch.float16: "fp16"}


class Chat:
    """The conversation, and the cache of everything in it up to the start of the last reply."""

    def __init__(self, model, tokenizer, stop, thinking=False, overrides=None, max_new_tokens=1024, seed=None,
                 system=None, speculative=0, checkpoint=None):
        self.model, self.tok, self.stop = model, tokenizer, stop
        self.checkpoint = checkpoint  # the folder the model came from: its vision tower and image settings
        self.thinking, self.overrides, self.max_new_tokens, self.seed = thinking, overrides or {}, max_new_tokens, seed
        self.system, self.speculative = system, speculative  # K guesses per main-model step; 0: plain decoding
        self.end_think = tokenizer.special_tokens[END_THINK]
        self.reset()

    def reset(self):
        self.messages = [{"role": "system", "content": self.system}] if self.system else []
        self.kept_ids, self.kept_cache = [], None  # tokens the kept cache has read
        self.stats = None  # the last finished reply's numbers
        self.images = []  # {"path", "pixel_values", "image_grid_thw"} of each image in self.messages, in order
        self.pending = []  # images /image attached to the next message

    def attach(self, path):
        """Read the image file at `path` for the next message. Returns (its size (w, h), image_grid_thw, settings).
        The vision tower is attached here, on the first image, so that a checkpoint without one says so now."""
        if self.speculative:
            raise ValueError("images cannot go with --speculative yet (speculative decoding does not take them): "
                             "restart the chat without --speculative to attach one")
        file = Path(path).expanduser()
        if not file.is_file():
            raise FileNotFoundError(f"no image file at {file}{' (that is a folder)' if file.is_dir() else ''}")
        if self.model.visual is None:
            p = self.model.embed_tokens.weight
            self.model.visual = load_vision(self.checkpoint, p.dtype, p.device)
        settings = ImageSettings.load(self.checkpoint)  # the checkpoint's, or the values Qwen3.5 publishes
        image = load_image(file)
        pixels, grid = preprocess(image, settings=settings)  # (N, 3·2·16·16), [[1, gh, gw]]
        self.pending.append(dict(path=str(file), pixel_values=pixels, image_grid_thw=grid))
        return image.size, grid, settings

    def expand(self, ids, images):
        """The rendered ids with each image's one <|image_pad|> repeated once per merged token."""
        if not images:
            return ids
        cfg = self.model.visual.cfg
        grids = torch.cat([i["image_grid_thw"] for i in images])
        return expand_image_tokens(ids, grids, cfg.image_token_id, cfg.spatial_merge_size)

    def settings(self):
        return {**CARD[self.thinking], **{k: v for k, v in self.overrides.items() if v is not None}}

    def respond(self, text):
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
        cache = copy.deepcopy(self.kept_cache) if reuse else self.model.new_cache()
        new = ids[len(self.kept_ids):] if reuse else ids
        unread = self.pending if reuse else images  # the kept cache has read every earlier message's images
        pixels = {} if not unread else dict(pixel_values=torch.cat([i["pixel_values"] for i in unread]),
                                            image_grid_thw=torch.cat([i["image_grid_thw"] for i in unread]))
        with torch.no_grad():  # the images' offset of M-RoPE positions stays in cache.delta for every later token
            self.model(torch.tensor([new], device=device), cache=cache, last_only=True, **pixels)
        kept = copy.deepcopy(cache)  # before the reply: the next turn starts here

        reply, part, ended, first = [], "think" if self.thinking else "answer", False, None
        stream = TextStream(self.tok)
        seed = None if self.seed is None else self.seed + len(messages)  # reproducible, yet not every turn alike
        counts = {}  # speculative decoding's: main-model steps after the prefill, guesses proposed and accepted
        for token in generate(self.model, rest, self.max_new_tokens, stop=self.stop, seed=seed, cache=cache,
                              speculative=self.speculative, stats=counts, **self.settings()):
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
            piece = stream.push(token)
            if piece:
                yield part, piece
        yield part, stream.flush()

        tokens = len(reply) + ended
        stats = dict(prompt=len(new) + len(rest), reused=len(ids) - len(new), tokens=tokens, prefill_s=prefill_s,
                     cut=not ended, cut_thinking=not ended and part == "think",
                     image_tokens=new.count(self.model.visual.cfg.image_token_id) if unread else 0)
        if tokens > 1:
            stats["decode_tok_s"] = (tokens - 1) / (time.perf_counter() - first)
        if counts.get("steps"):  # the prefill made the first token; each verify step the rest
            stats.update(counts, per_step=(tokens - 1) / counts["steps"])
        message = self.reply_message(reply)
        # the turn joins in one assignment, new lists and cache: nothing of it shows until it is all there
        self.messages, self.kept_ids, self.kept_cache, self.stats = messages + [message], ids, kept, stats
        self.images, self.pending = images, []

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


def positive(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def nonnegative(text):
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 0")
    return int(text)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Chat with the hand-written Qwen3.5 in the terminal. In the chat, /help "
                                            "lists the commands. Ctrl-C stops a reply without leaving (your "
                                            "unanswered message is dropped); Ctrl-D or /quit leaves.")
    p.add_argument("--model", help="checkpoint folder, hub id (default Qwen/Qwen3.5-0.8B), size or 'synthetic'")
    p.add_argument("--device", help="cpu, cuda or mps (default: the fastest available)")
    p.add_argument("--dtype", choices=["bf16", "fp32", "fp16"],
                   help="default: the checkpoint's (bf16 for Qwen3.5)")
    p.add_argument("--threads", type=positive,
                   help="CPU threads for torch (default: torch's, one per core; 1 on the synthetic checkpoint, whose "
                        "tiny matrices gain nothing from more). On a busy machine fewer threads can decode faster")
    p.add_argument("--think", action=argparse.BooleanOptionalAction, default=None,
                   help="start with thinking on/off (default: the checkpoint's: off for 0.8B and 2B, on for 4B+)")
    p.add_argument("--hide-thinking", action="store_true", help="think, but do not print the reasoning")
    p.add_argument("--system", help="a system message for the whole conversation")
    p.add_argument("--max-new-tokens", type=positive,
                   help="reply length limit (default 1024; 48 on the synthetic one); /limit N changes it in the chat")
    p.add_argument("--seed", type=int, help="make the sampling reproducible")
    p.add_argument("--speculative", type=nonnegative, default=0, metavar="K",
                   help="draft K tokens per main-model step with the checkpoint's MTP head (default 0: plain "
                        "decoding); turns the model card's presence penalty off")
    for name, kind in (("temperature", float), ("top-p", float), ("top-k", int), ("min-p", float),
                       ("presence-penalty", float)):
        p.add_argument(f"--{name}", type=kind, help=f"override the model card's {name} "
                                                    f"(no thinking / thinking: {CARD[False][name.replace('-', '_')]}"
                                                    f" / {CARD[True][name.replace('-', '_')]})")
    return p.parse_args(argv)


def line_editing():
    """Give input() GNU readline's line editor when the chat runs in a terminal. True when a paste of several lines
    arrives as one message: bracketed paste, where the terminal marks a paste's start and end (GNU readline 8.1+;
    Python switches it off, so it is switched back on here)."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return False
    try:
        import readline  # importing it is what makes input() use it
    except ImportError:  # e.g. Windows: plain input(), and """ blocks for several lines
        return False
    version = re.match(r"(\d+)\.(\d+)", getattr(readline, "_READLINE_LIBRARY_VERSION", ""))
    if "libedit" in (readline.__doc__ or "") or not version or tuple(map(int, version.groups())) < (8, 1):
        return False
    readline.parse_and_bind("set enable-bracketed-paste on")
    return True


def help_text(paste):
    several = ("a paste of several lines is one message (in terminals that mark pastes, as most do); or, for"
               if paste else "for") + f" several lines, type {BLOCK} alone on a line, the lines, then {BLOCK} again"
    return (f"commands: {COMMANDS}. Enter sends; {several}. /image PATH attaches a picture to your next message "
            "(resized to multiples of 32 pixels a side within the checkpoint's pixel budget: one token per 32 × 32 "
            "pixels). Ctrl-C stops a reply and drops your unanswered message; Ctrl-D, /quit or Ctrl-C twice at the "
            "prompt leaves.")


def read_message():
    """(text, is_block): one line (with bracketed paste, a paste of any number of lines), or the lines between two
    lines of three double quotes."""
    text = input("\nyou> ")
    if text.strip() != BLOCK:
        return text, False
    lines = []
    while (line := input("... ")).strip() != BLOCK:
        lines.append(line)
    return "\n".join(lines), True


def shown(content):
    """A message's content as /history shows it: the text, each image part as [image]."""
    if isinstance(content, str):
        return content
    return "".join("[image]" if part.get("type") == "image" else part["text"] for part in content)


def history(chat):
    """The conversation as the chat keeps it, one line per message."""
    lines = []
    for i, m in enumerate(chat.messages, 1):
        text = shown(m["content"])
        n = text.count("\n") + 1
        line = (f"{i:3} {m['role']:9} {len(text):6} characters{f' in {n} lines' if n > 1 else ''}: "
                f"{text[:40]!r}{'…' if len(text) > 40 else ''}")
        if m.get("reasoning_content"):
            line += f" (and {len(m['reasoning_content'])} characters of reasoning, which later prompts leave out)"
        lines.append(line)
    if chat.pending:
        lines.append(f"(and {len(chat.pending)} image{'s' if len(chat.pending) > 1 else ''} attached to your next "
                     "message)")
    if not chat.messages:
        return "\n".join(lines or ["(no messages yet)"])
    kept = f"(the kept cache has read {len(chat.kept_ids)} tokens: the next prompt starts with them)"
    return "\n".join(lines + [kept])


def image_command(chat, arg):
    """/image PATH: attach the picture to the next message and say what it costs; one line when it cannot be."""
    if not arg:
        print("usage: /image PATH attaches the picture at PATH (PNG, JPEG, WebP, GIF or BMP) to your next message")
        return
    try:  # a path may come quoted or with escaped spaces (as a terminal writes a file dropped on it)
        words = shlex.split(arg)
        path = words[0] if len(words) == 1 else arg
    except ValueError:
        path = arg
    try:
        (w0, h0), grid, s = chat.attach(path)
    except (OSError, ValueError) as e:
        print(f"/image: {e}")
        return
    h, w = (int(n) * s.patch_size for n in grid[0, 1:])
    tokens = tokens_per_image(grid, s.merge_size)[0]
    if not s.min_pixels <= w0 * h0 <= s.max_pixels:
        how = f"; resized from {w0}×{h0} into the budget of {s.min_pixels:,} to {s.max_pixels:,} pixels"
    else:
        how = f"; resized from {w0}×{h0} to multiples of {s.factor}" if (w, h) != (w0, h0) else ""
    print(f"[image {w}×{h} → {tokens} tokens{how}; it goes with your next message]")


def command(chat, text, view, paste):
    """Carry out a /command; returns the new view of the reasoning ("dim" or "hide"), or None to leave."""
    words = text.split()
    name, args = words[0], words[1:]
    if name in ("/quit", "/exit") and not args:
        return None
    if name == "/image":
        image_command(chat, text[len(name):].strip())
    elif name == "/reset" and not args:
        dropped = len(chat.pending)
        chat.reset()
        print(f"(new conversation{f'; {dropped} attached image(s) dropped' if dropped else ''})")
    elif name == "/think" and len(args) == 1 and args[0] in ("on", "off", "hide"):
        chat.thinking, view = args[0] != "off", "hide" if args[0] == "hide" else "dim"
        print(f"(thinking {args[0]}; sampling {chat.settings()})")
    elif name == "/limit" and len(args) == 1 and args[0].isdigit() and int(args[0]) > 0:
        chat.max_new_tokens = int(args[0])
        print(f"(replies stop at {chat.max_new_tokens} tokens)")
    elif name == "/history" and not args:
        print(history(chat))
    elif name == "/help" and not args:
        print(help_text(paste))
    else:
        print(f"{text!r} is not one of the commands: {COMMANDS}")
    return view


def turn(chat, text, view):
    """Stream one reply, then its numbers; Ctrl-C stops it and the chat goes on as if the message was never sent."""
    pads = [s for s in PADS if s in text]
    if pads:
        print(f"(not sent: {pads[0]} stands for the tokens of an image or video and cannot be typed; attach a picture "
              "with /image PATH)")
        return
    found = [s for s in chat.tok.special_tokens if s in text]
    if found:
        print(f"(note: {', '.join(found)} in your message becomes the token itself, one id, not text, as with Qwen's "
              "own tokenizer: the model reads a marker there)")
    dim, plain = ("\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "")
    before = chat.messages  # respond() replaces the list when, and only when, the turn joins
    try:
        print("qwen> ", end="", flush=True)
        for part, piece in chat.respond(text):
            if part == "think" and view == "hide":
                continue
            print(f"{dim}{piece}{plain}" if part == "think" else piece, end="", flush=True)
        s = chat.stats
        speed = f", {s['decode_tok_s']:.1f} tokens/s" if "decode_tok_s" in s else ""
        image = f" ({s['image_tokens']} of them image tokens)" if s["image_tokens"] else ""
        print(f"\n[{s['tokens']} tokens{speed}; prompt: {s['prompt']} new tokens{image} in {s['prefill_s']:.2f} s, "
              f"{s['reused']} read from the cache]")
        if "steps" in s:
            print(f"[speculative, {chat.speculative} guesses per step: {s['accepted']} of {s['proposed']} accepted "
                  f"({s['accepted'] / s['proposed']:.0%}), {s['per_step']:.2f} tokens per main-model step "
                  "(plain decoding: 1)]")
        if s["cut_thinking"]:
            print(f"[the {chat.max_new_tokens}-token limit cut the reasoning: the reply is kept with an empty answer; "
                  "/limit N raises the limit]")
        elif s["cut"]:
            print(f"[stopped at the {chat.max_new_tokens}-token limit; the reply is kept as it is; /limit N raises it]")
    except KeyboardInterrupt:
        if chat.messages is before:
            kept = "; the attached image(s) stay for your next message" if chat.pending else ""
            print(f"{plain} [stopped: your message and the partial reply are left out of the conversation{kept}]")
        else:  # the reply had ended and joined; only its numbers were cut short
            print(f"{plain} [the reply was complete and is kept]")


def main(argv=None):
    try:
        return run(parse_args(argv))
    except KeyboardInterrupt:  # while loading, or between two steps of the loop
        print("\n(interrupted) bye")
        return 130


def run(args):
    from qwen.fast import load_fast, numerics
    from qwen.mtp import load_mtp

    try:
        if args.speculative and args.presence_penalty:
            raise ValueError(f"--presence-penalty {args.presence_penalty} cannot go with --speculative: the penalty "
                             "changes the distribution with every token, drafts included; drop one of the two")
        device = torch.device(args.device) if args.device else pick_device()
        available = {"cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}
        if not available.get(device.type, True):
            raise ValueError(f"--device {args.device}: this machine's torch has no such device; leave --device out "
                             "to use the fastest one it has")
        path = open_model(args.model)
        tok = load_tokenizer(path)
        synthetic = is_synthetic(path)
        torch.set_num_threads(args.threads or (1 if synthetic else torch.get_num_threads()))
        model = load_fast(path, dtype=args.dtype, device=device)  # the fast path: same results (chapter 9)
        if args.speculative:
            p = model.embed_tokens.weight  # the MTP head, attached now: a checkpoint without one is refused here
            model.mtp = load_mtp(path, p.dtype, p.device)
    except (FileNotFoundError, ValueError, RuntimeError) as e:
        sys.exit(f"error: {e}")
    if synthetic:
        print("synthetic checkpoint: its weights are random, so every reply is random tokens. The code path is the "
              "real one; load the real model with --model Qwen/Qwen3.5-0.8B to talk.")
    thinking = default_thinking(path) if args.think is None else args.think
    overrides = {k: getattr(args, k) for k in CARD[False]}
    if args.speculative:
        overrides["presence_penalty"] = 0.0
        print(f"--speculative {args.speculative}: the model card's presence penalty ({CARD[False]['presence_penalty']}"
              f", thinking {CARD[True]['presence_penalty']}) is off, as speculative decoding needs a distribution that "
              "does not change with every token")
    chat = Chat(model, tok, checkpoint_stop_tokens(path), thinking or args.hide_thinking, overrides,
                args.max_new_tokens or (48 if synthetic else 1024), args.seed, args.system, args.speculative,
                checkpoint=path)
    view = "hide" if args.hide_thinking else "dim"
    paste = line_editing()
    dtype = next(model.parameters()).dtype
    n = torch.get_num_threads()
    threads = f", {n} CPU thread{'s' if n > 1 else ''} (--threads N)" if device.type == "cpu" else ""
    print(f"{path.name}: weights in {DTYPES.get(dtype, dtype)} on {device}{threads}; thinking "
          f"{'hidden' if view == 'hide' else 'on' if chat.thinking else 'off'}; replies stop at "
          f"{chat.max_new_tokens} tokens (/limit N). {help_text(paste)}")
    print(f"numerics: {numerics(model)}")
    at_prompt_ctrl_c = False  # a second Ctrl-C in a row at the prompt leaves
    while True:
        try:
            text, block = read_message()
        except EOFError:
            print("\nbye")
            return 0
        except KeyboardInterrupt:
            if at_prompt_ctrl_c:
                print("\nbye")
                return 0
            at_prompt_ctrl_c = True
            print("\n(Ctrl-C again leaves, as do Ctrl-D and /quit)")
            continue
        at_prompt_ctrl_c = False
        text = text.strip()
        if not text:
            continue
        if text.startswith("/") and "\n" not in text and not block:
            view = command(chat, text, view, paste)
            if view is None:
                print("bye")
                return 0
            continue
        turn(chat, text, view)


if __name__ == "__main__":
    sys.exit(main())
