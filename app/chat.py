"""A terminal chat with the hand-written model: streamed replies, several turns, thinking on or off.

The conversation itself (rendering, the cache kept across turns, images pending, the reply's numbers) is
qwen/session.py; this program reads messages, carries out the /commands and prints. Ctrl-C at any moment, the
prefill included, leaves the conversation and the kept cache as they were before the message.
Typing goes through readline where Python has it: arrow keys edit and recall, a line may be of any length (the
terminal's own line editor stops at 4,095 characters on Linux), and with GNU readline 8.1 or later a paste of
several lines arrives as one message (bracketed paste). Everywhere, a message may span the lines between two lines
of three double quotes.
/image PATH attaches a picture to the next message; the vision tower is loaded here on the first one, so that a
checkpoint without one says so then.
--speculative K decodes with the checkpoint's multi-token-prediction head drafting K tokens per main-model step
(qwen/speculative.py): the same replies at temperature 0, the same distribution otherwise; after each reply the chat
prints the share of guesses the main model accepted and the tokens each main-model step produced. The model card's
presence penalty goes off with it (one line says so): this course's speculative loop does not apply one (the method
could: each verified position would be penalised for the guesses before it).
Run: python main.py chat [--model synthetic] (or bash course.sh chat); in the chat, /help lists the commands.
"""
import argparse
import dataclasses
import re
import shlex
import sys
from pathlib import Path

import torch

from qwen.chat import default_thinking
from qwen.config import DTYPES
from qwen.course import open_model, pick_device
from qwen.draft import MTPDraft
from qwen.fast import load_fast, numerics
from qwen.generate import checkpoint_stop_tokens
from qwen.image import ImageSettings
from qwen.mrope import tokens_per_image
from qwen.mtp import load_mtp
from qwen.sampling import CARD
from qwen.session import Session
from qwen.synthetic import is_synthetic
from qwen.tokenizer import load_tokenizer
from qwen.vision import load_vision

COMMANDS = "/reset, /think on|off|hide, /limit N, /history, /image PATH, /help, /quit"
BLOCK = '"""'  # a line of its own opens and closes a message of several lines
PADS = ("<|image_pad|>", "<|video_pad|>")  # stand for an image's (a video's) tokens: only /image writes them


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
                        "decoding); turns the model card's presence penalty off (not applied by this loop)")
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


def image_command(chat: Session, arg: str, checkpoint: Path) -> None:
    """/image PATH: attach the picture to the next message and say what it costs; one line when it cannot be. The
    vision tower of the checkpoint folder `checkpoint` is loaded here, on the first image: the one place it is."""
    if not arg:
        print("usage: /image PATH attaches the picture at PATH (PNG, JPEG, WebP, GIF or BMP) to your next message")
        return
    try:  # a path may come quoted or with escaped spaces (as a terminal writes a file dropped on it)
        words = shlex.split(arg)
        path = words[0] if len(words) == 1 else arg
    except ValueError:
        path = arg
    try:
        if chat.draft is None and chat.model.visual is None:
            p = next(chat.model.parameters())
            chat.model.visual = load_vision(checkpoint, p.dtype, p.device)  # a checkpoint without one says so here
        s = ImageSettings.load(checkpoint)  # the checkpoint's, or the values Qwen3.5 publishes
        (w0, h0), grid = chat.attach(path, s)
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


def command(chat: Session, text: str, view: str, paste: bool, checkpoint: Path) -> str | None:
    """Carry out a /command; returns the new view of the reasoning ("dim" or "hide"), or None to leave."""
    words = text.split()
    name, args = words[0], words[1:]
    if name in ("/quit", "/exit") and not args:
        return None
    if name == "/image":
        image_command(chat, text[len(name):].strip(), checkpoint)
    elif name == "/reset" and not args:
        dropped = len(chat.pending)
        chat.reset()
        print(f"(new conversation{f'; {dropped} attached image(s) dropped' if dropped else ''})")
    elif name == "/think" and len(args) == 1 and args[0] in ("on", "off", "hide"):
        chat.thinking, view = args[0] != "off", "hide" if args[0] == "hide" else "dim"
        shown = {k: v for k, v in dataclasses.asdict(chat.sampling()).items() if k != "seed"}
        print(f"(thinking {args[0]}; sampling {shown})")
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
            print(f"[speculative, {chat.draft.k} guesses per step: {s['accepted']} of {s['proposed']} accepted "
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
    try:
        if args.speculative and args.presence_penalty:
            raise ValueError(f"--presence-penalty {args.presence_penalty} cannot go with --speculative: this course's "
                             "speculative decoding does not apply a presence penalty; drop one of the two")
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
    overrides = {k: getattr(args, k) for k in [*CARD[False], "seed"]}
    if args.speculative:
        overrides["presence_penalty"] = 0.0
        print(f"--speculative {args.speculative}: the model card's presence penalty ({CARD[False]['presence_penalty']}"
              f", thinking {CARD[True]['presence_penalty']}) is off: this course's speculative decoding does not apply "
              "one (it could: each verified position penalised for the guesses before it)")
    draft = MTPDraft(model, args.speculative) if args.speculative else None
    chat = Session(model, tok, checkpoint_stop_tokens(path), thinking or args.hide_thinking, overrides,
                   args.max_new_tokens or (48 if synthetic else 1024), args.system, draft)
    view = "hide" if args.hide_thinking else "dim"
    paste = line_editing()
    dtype = next(model.parameters()).dtype
    n = torch.get_num_threads()
    threads = f", {n} CPU thread{'s' if n > 1 else ''} (--threads N)" if device.type == "cpu" else ""
    name = next((name for name, d in DTYPES.items() if d == dtype), dtype)  # the first, short name: bf16
    print(f"{path.name}: weights in {name} on {device}{threads}; thinking "
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
            view = command(chat, text, view, paste, path)
            if view is None:
                print("bye")
                return 0
            continue
        turn(chat, text, view)


if __name__ == "__main__":
    sys.exit(main())
