"""A terminal chat with the hand-written model: streamed replies, several turns, thinking on or off.

The conversation itself (rendering, the cache kept across turns, images pending, the reply's numbers) is
qwen/session.py; this program reads messages, carries out the /commands and prints. Ctrl-C at any moment, the
prefill included, leaves the conversation and the kept cache as they were before the message.
Typing goes through readline where Python has it: arrow keys edit and recall, a line may be of any length (the
terminal's own line editor stops at 4,095 characters on Linux), and with GNU readline 8.1 or later a paste of
several lines arrives as one message (bracketed paste). Everywhere, a message may span the lines between two lines
of three double quotes.
/image PATH attaches a picture to the next message (/image alone lists those pending, /image drop drops them;
app/pictures.py); the vision tower is loaded on the first one, so that a checkpoint without one says so then. On the
CPU a picture the tower should take seconds to read is announced with the time (qwen/vision_cost.py) and how to lower
the pixel budget (--max-pixels N, for the chat or for one picture).
--speculative K decodes with the checkpoint's multi-token-prediction head drafting K tokens per main-model step
(qwen/speculative.py): the same replies at temperature 0, the same distribution otherwise; after each reply the chat
prints the share of guesses the main model accepted, the tokens each main-model step produced and the speed against
plain decoding measured right after, saying plainly when the draft slowed decoding down (a random one always does).
Pictures cannot go with it (the start-up text leaves /image out). The model card's presence penalty goes off with it
(one line says so): this implementation's verify pass applies no penalty.
Run: python main.py chat [--model synthetic] (or bash course.sh chat); in the chat, /help lists the commands.
"""
import argparse
import re
import sys

import torch

from app.pictures import budget_settings, image_command
from qwen import lang
from qwen.chat import default_thinking
from qwen.config import DEFAULT_MODEL, DTYPES
from qwen.course import open_model, pick_device
from qwen.draft import MTPDraft
from qwen.fast import load_fast
from qwen.lang import tr
from qwen.mtp import load_mtp
from qwen.products import numerics
from qwen.quantized import describe, slow_note
from qwen.quantlinear import SCHEMES
from qwen.sampling import CARD, RANGES, Range
from qwen.session import Session
from qwen.tokenizer import load_tokenizer


def help_rows():
    """Each command as /help lists it, one line each: (usage, what it does); /image's three are left out with
    --speculative."""
    return [("/image PATH", tr("attach the picture at PATH to your next message (PNG, JPEG, WebP, GIF or BMP); it says "
                               "how many are pending",
                               "把 PATH 处的图片附到你的下一条消息上（PNG、JPEG、WebP、GIF 或 BMP），"
                               "并告诉你有几张待发送")),
            ("/image PATH --max-pixels N", tr("the same, resized into a smaller budget of N pixels (fewer tokens, a "
                                              "faster tower)",
                                              "同上，但缩放到更小的 N 像素预算内（token 更少，视觉塔更快）")),
            ("/image", tr("list the pictures pending for your next message: file, size, image tokens",
                          "列出下一条消息待发送的图片：文件、尺寸、图像 token 数")),
            ("/image drop", tr("drop the pending pictures", "丢弃待发送的图片")),
            ("/reset", tr("start a new conversation (pending pictures are dropped too)",
                          "开始新对话（待发送的图片也一并丢弃）")),
            ("/think on|off|hide", tr("thinking on, off, or on without printing the reasoning; prints the sampling "
                                      "settings",
                                      "打开思考、关闭思考，或思考但不打印推理过程；同时打印采样设置")),
            ("/limit N", tr("replies stop at N tokens", "回复最多 N 个 token")),
            ("/history", tr("the conversation so far, one line per message", "到目前为止的对话，每条消息一行")),
            ("/help", tr("this list", "显示这份命令列表")),
            ("/quit", tr("leave (so do Ctrl-D and Ctrl-C twice at the prompt)",
                         "退出（在提示符下按 Ctrl-D 或连按两次 Ctrl-C 也可以）"))]


BLOCK = '"""'  # a line of its own opens and closes a message of several lines
PADS = ("<|image_pad|>", "<|video_pad|>")  # stand for an image's (a video's) tokens: only /image writes them


def within(allowed: Range):
    """An argparse type: the text as a number (whole when the range says so) in `allowed`, else one line saying so;
    the options of the sampling rules and the token limit take their ranges from qwen.sampling.RANGES."""
    def number(text):
        try:
            value = (int if allowed.whole else float)(text)
        except ValueError:
            value = None
        if value is None or not allowed.holds(value):
            raise argparse.ArgumentTypeError(tr(f"{text!r} is not {allowed.words()}",
                                                f"{text!r} 无效，应为{allowed.words()}"))
        return value
    return number


positive, nonnegative = within(Range(low=1, whole=True)), within(Range(low=0, whole=True))


def parse_args(argv=None):
    """The chat's command line; --lang is read first, so that --help speaks the language asked for."""
    lang.use(lang.from_command_line(sys.argv[1:] if argv is None else argv))
    args = parser().parse_args(argv)
    lang.use(args.lang)
    return args


def parser():
    p = argparse.ArgumentParser(prog="python main.py chat",
                                description=tr("Chat with the hand-written Qwen3.5 in the terminal. In the chat, /help "
                                               "lists the commands. Ctrl-C stops a reply without leaving (your "
                                               "unanswered message is dropped); Ctrl-D or /quit leaves.",
                                               "在终端里和手写的 Qwen3.5 聊天。聊天中输入 /help 列出所有命令。"
                                               "Ctrl-C 停止当前回复但不退出（你那条还没得到回答的消息会被丢弃）；"
                                               "Ctrl-D 或 /quit 退出。"))
    p.add_argument("--model", help=tr(f"checkpoint folder, hub id (default {DEFAULT_MODEL}), size or 'synthetic'",
                                      f"检查点文件夹、Hugging Face 模型名（默认 {DEFAULT_MODEL}）、尺寸或 'synthetic'"))
    p.add_argument("--device", help=tr("cpu, cuda or mps (default: the fastest available)",
                                       "cpu、cuda 或 mps（默认：可用设备中最快的）"))
    p.add_argument("--dtype", choices=["bf16", "fp32", "fp16"],
                   help=tr("default: the checkpoint's (bf16 for Qwen3.5)",
                           "默认用检查点自己的 dtype（Qwen3.5 是 bf16）"))
    p.add_argument("--quant", choices=SCHEMES,
                   help=tr("hold the projections and the head as int8 or int4 codes (chapter 12), or as llama.cpp's "
                           "q8_0 or q4_0 blocks (chapter 13): less memory. int8 / int4 with bf16 on a CPU: torch's "
                           "packed kernels read the codes, fewer bytes per token; q8_0 / q4_0 on a CPU with a C++ "
                           "compiler: the course's kernel reads the blocks (use --dtype fp32, as llama.cpp computes); "
                           "elsewhere (cuda, mps, no kernel) each product dequantizes a block of the weight first, "
                           "which decodes slower than without --quant; default: none",
                           "把投影和输出头量化成 int8 或 int4 码（第 12 章），或 llama.cpp 的 q8_0、q4_0 块"
                           "（第 13 章）：占的内存更少。int8、int4 在 CPU 上用 bf16 时，torch 的打包 kernel 直接读码，"
                           "每个 token 读的字节更少；q8_0、q4_0 在有 C++ 编译器的 CPU 上由本课程的 kernel 直接读块"
                           "（加 --dtype fp32，和 llama.cpp 一样）；其他情况（cuda、mps、没有 kernel）"
                           "每次矩阵乘法都要先反量化一块权重，解码反而比不加 --quant 更慢；默认不量化"))
    p.add_argument("--threads", type=positive,
                   help=tr("CPU threads for torch (default: torch's, one per core; 1 on the synthetic checkpoint, "
                           "whose tiny matrices gain nothing from more). On a busy machine fewer threads can decode "
                           "faster",
                           "torch 使用的 CPU 线程数（默认按 torch 自己的设置，每个核一个；合成检查点上为 1："
                           "它的矩阵很小，线程再多也快不了）。机器繁忙时，线程少一些解码反而可能更快"))
    p.add_argument("--think", action=argparse.BooleanOptionalAction, default=None,
                   help=tr("start with thinking on/off (default: the checkpoint's: off for 0.8B and 2B, on for 4B+)",
                           "启动时打开或关闭思考（默认随检查点：0.8B 和 2B 关闭，4B 及以上打开）"))
    p.add_argument("--hide-thinking", action="store_true",
                   help=tr("think, but do not print the reasoning", "思考，但不打印推理过程"))
    p.add_argument("--system", help=tr("a system message for the whole conversation", "整个对话使用的系统消息"))
    p.add_argument("--max-new-tokens", type=within(RANGES["max_new_tokens"]),
                   help=tr("reply length limit (default 1024; 48 on the synthetic one); /limit N changes it in the "
                           "chat",
                           "单条回复的 token 上限（默认 1024；合成检查点上为 48）；聊天中可用 /limit N 修改"))
    p.add_argument("--seed", type=within(RANGES["seed"]), help=tr("make the sampling reproducible", "让采样结果可复现"))
    p.add_argument("--speculative", type=nonnegative, default=0, metavar="K",
                   help=tr("draft K tokens per main-model step with the checkpoint's MTP head (default 0: plain "
                           "decoding); turns the model card's presence penalty off",
                           "主模型每走一步，用检查点的 MTP 头起草 K 个 token（默认 0，即普通解码）；"
                           "会关掉模型卡里的存在惩罚"))
    p.add_argument("--max-pixels", type=positive, metavar="N",
                   help=tr("resize each picture into at most N pixels (default: the checkpoint's budget, 16,777,216 "
                           "for Qwen3.5): fewer image tokens and a quicker vision tower; /image PATH --max-pixels N "
                           "sets it for one picture",
                           "把每张图片缩放到不超过 N 像素（默认用检查点的预算，Qwen3.5 为 16,777,216）："
                           "图像 token 更少，视觉塔更快；/image PATH --max-pixels N 只对这一张图片生效"))
    for name in ("temperature", "top-p", "top-k", "min-p", "presence-penalty"):
        field = name.replace('-', '_')
        off, on = CARD[False][field], CARD[True][field]
        zh = setting_name(field)
        zh = f" {zh}" if zh.isascii() else zh  # one space between Chinese and a Latin name
        p.add_argument(f"--{name}", type=within(RANGES[field]),
                       help=tr(f"override the model card's {name} (no thinking / thinking: {off} / {on})",
                               f"覆盖模型卡里的{zh}（不思考 / 思考：{off} / {on}）"))
    p.add_argument("--lang", choices=lang.LANGUAGES,
                   help=tr("the language it speaks: en or zh (default: QWEN_LANG, else the locale)",
                           "输出语言：en 或 zh（默认取 QWEN_LANG，没有则按系统 locale）"))
    return p


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


def commands(images=True):
    """The commands in one line (without /image when images cannot be attached: under --speculative)."""
    return tr(", ", "、").join((["/image [PATH | drop]"] if images else []) +
                     [usage for usage, _ in help_rows() if not usage.startswith("/image")])


def help_text(paste, images=True):
    """/help: one line per command, then how to type and stop."""
    rows = [(usage, what) for usage, what in help_rows() if images or not usage.startswith("/image")]
    width = max(len(usage) for usage, _ in rows)
    if paste:
        enter = tr(f"Enter sends; a paste of several lines is one message (in terminals that mark pastes, as most "
                   f"do); or, for several lines, type {BLOCK} alone on a line, the lines, then {BLOCK} again.",
                   f"回车发送；粘贴的多行文字算作一条消息（前提是终端会标记粘贴内容，大多数终端都会）；"
                   f"也可以先单独一行输入 {BLOCK}，再写多行内容，最后单独一行再输入 {BLOCK}。")
    else:
        enter = tr(f"Enter sends; for several lines, type {BLOCK} alone on a line, the lines, then {BLOCK} again.",
                   f"回车发送；要写多行，先单独一行输入 {BLOCK}，再写多行内容，最后单独一行再输入 {BLOCK}。")
    lines = [f"  {usage:{width}}  {what}" for usage, what in rows]
    if images:
        lines.append(tr("A picture is resized to multiples of 32 pixels a side within the pixel budget: one token "
                        "per 32 × 32 pixels.",
                        "图片会在像素预算内缩放，边长取 32 像素的倍数：每 32 × 32 像素一个 token。"))
    else:
        lines.append(tr("Pictures cannot go with --speculative: restart without it to attach one.",
                        "用了 --speculative 就不能附图片：要附图，去掉它重新启动。"))
    return "\n".join([tr("commands:", "命令："), *lines, enter,
                      tr("Ctrl-C stops a reply and drops your unanswered message.",
                         "Ctrl-C 停止当前回复，并丢弃你那条还没得到回答的消息。")])


def read_message():
    """(text, is_block): one line (with bracketed paste, a paste of any number of lines), or the lines between two
    lines of three double quotes."""
    text = input(tr("\nyou> ", "\n你> "))
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
    return "".join(tr("[image]", "[图片]") if part.get("type") == "image" else part["text"] for part in content)


def history(chat):
    """The conversation as the chat keeps it, one line per message."""
    lines = []
    for i, m in enumerate(chat.messages, 1):
        text = shown(m["content"])
        n = text.count("\n") + 1
        several = tr(f" in {n} lines", f"，共 {n} 行") if n > 1 else ""
        line = (f"{i:3} {m['role']:9} " + tr(f"{len(text):6} characters{several}: ", f"{len(text):6} 个字符{several}：")
                + f"{text[:40]!r}{'…' if len(text) > 40 else ''}")
        if m.get("reasoning_content"):
            line += tr(f" (and {len(m['reasoning_content'])} characters of reasoning, which later prompts leave out)",
                       f"（另有 {len(m['reasoning_content'])} 个字符的推理过程，之后的提示词不再带上）")
        lines.append(line)
    if chat.pending:
        n = len(chat.pending)
        lines.append(tr(f"(and {n} images attached to your next message)", f"（另有 {n} 张图片附在你的下一条消息上）")
                     if n > 1 else tr(f"(and {n} image attached to your next message)",
                                      f"（另有 {n} 张图片附在你的下一条消息上）"))
    if not chat.messages:
        return "\n".join(lines or [tr("(no messages yet)", "（还没有消息）")])
    kept = tr(f"(the kept cache has read {len(chat.kept_ids)} tokens: the next prompt starts with them)",
              f"（保留的缓存已读过 {len(chat.kept_ids)} 个 token：下一轮的提示词以它们开头）")
    return "\n".join(lines + [kept])


def setting_name(field: str) -> str:
    """A sampling setting as a Chinese line names it: 温度, 存在惩罚; top-k, top-p and min-p as they are."""
    return {"temperature": "温度", "presence_penalty": "存在惩罚"}.get(field, field.replace("_", "-"))


def sampling_text(sampling) -> str:
    """temperature 1.0, top_p 0.95, top_k 20, min_p 0.0, presence_penalty 1.5 (the seed left out); in Chinese
    温度 1.0、top-p 0.95、top-k 20、min-p 0.0、存在惩罚 1.5."""
    names = ("temperature", "top_p", "top_k", "min_p", "presence_penalty")
    values = [tr("off", "关闭") if getattr(sampling, name) is None else getattr(sampling, name) for name in names]
    if lang.language() == "zh":
        return "、".join(f"{setting_name(name)} {value}" for name, value in zip(names, values))
    return ", ".join(f"{name} {value}" for name, value in zip(names, values))


def command(chat: Session, text: str, view: str, paste: bool, budget: int | None = None) -> str | None:
    """Carry out a /command; returns the new view of the reasoning ("dim" or "hide"), or None to leave. budget: the
    chat's --max-pixels."""
    words = text.split()
    name, args = words[0], words[1:]
    if name in ("/quit", "/exit") and not args:
        return None
    if name == "/image":
        image_command(chat, text[len(name):].strip(), budget)
    elif name == "/reset" and not args:
        dropped = len(chat.pending)
        chat.reset()
        print(tr(f"(new conversation; {dropped} attached image(s) dropped)",
                 f"（新对话；已丢弃 {dropped} 张附加的图片）") if dropped else tr("(new conversation)", "（新对话）"))
    elif name == "/think" and len(args) == 1 and args[0] in ("on", "off", "hide"):
        chat.thinking, view = args[0] != "off", "hide" if args[0] == "hide" else "dim"
        state = {"on": tr("on", "开启"), "off": tr("off", "关闭"), "hide": tr("hide", "开启，不打印推理过程")}[args[0]]
        print(tr(f"(thinking {state}; sampling: {sampling_text(chat.sampling())})",
                 f"（思考{state}；采样：{sampling_text(chat.sampling())}）"))
    elif name == "/limit" and len(args) == 1:
        try:
            chat.max_new_tokens = within(RANGES["max_new_tokens"])(args[0])
        except argparse.ArgumentTypeError as e:
            print(f"/limit{tr(': ', '：')}{e}")
            return view
        print(tr(f"(replies stop at {chat.max_new_tokens} tokens)", f"（回复最多 {chat.max_new_tokens} 个 token）"))
    elif name == "/history" and not args:
        print(history(chat))
    elif name == "/help" and not args:
        print(help_text(paste, images=chat.draft is None))
    else:
        print(tr(f"{text!r} is not one of the commands: {commands(images=chat.draft is None)} (/help says what each "
                 "does)",
                 f"{text!r} 不是可用的命令：{commands(images=chat.draft is None)}（/help 说明每条命令的作用）"))
    return view


def speculative_lines(s: dict, k: int) -> list[str]:
    """After a speculative reply: the draft's acceptance and tokens per step, the speed against plain decoding's
    measured just after it, and when the draft lost, a plain line that it slows decoding down and why."""
    acceptance = s["accepted"] / s["proposed"]
    lines = [tr(f"[speculative, {k} guesses per step: {s['accepted']} of {s['proposed']} accepted ({acceptance:.0%}), "
                f"{s['per_step']:.2f} tokens per main-model step (plain decoding: 1)]",
                f"[投机解码，每步猜 {k} 个：接受了 {s['accepted']} 个，共猜 {s['proposed']} 个（{acceptance:.0%}）；"
                f"主模型每步产出 {s['per_step']:.2f} 个 token（普通解码是 1 个）]")]
    if "decode_tok_s" not in s or "plain_tok_s" not in s:
        return lines
    ratio = s["decode_tok_s"] / s["plain_tok_s"]
    if ratio >= 1:
        lines.append(tr(f"[{s['decode_tok_s']:.1f} tokens/s: {ratio:.1f}× plain decoding's {s['plain_tok_s']:.1f} on "
                        "this conversation, measured just after]",
                        f"[{s['decode_tok_s']:.1f} token/s：紧接着在这段对话上测得的普通解码是 "
                        f"{s['plain_tok_s']:.1f} token/s，投机解码快了 {ratio:.1f}×]"))
    else:
        lines.append(tr(f"[this draft slows decoding down: {s['decode_tok_s']:.1f} tokens/s against "
                        f"{s['plain_tok_s']:.1f} for plain decoding on this conversation, measured just after "
                        f"({1 / ratio:.1f}× slower). With {acceptance:.0%} of its guesses accepted, each main-model "
                        f"step makes {s['per_step']:.2f} tokens but reads {k + 1} and waits for {k} draft passes (and "
                        "a replay of the DeltaNet layers after a rejection): a random draft always loses, a weak one "
                        "whenever its acceptance is below the break-even. Restart without --speculative to decode "
                        "plainly]",
                        f"[这个草稿反而拖慢了解码：{s['decode_tok_s']:.1f} token/s，"
                        "而紧接着在这段对话上测得的普通解码是 "
                        f"{s['plain_tok_s']:.1f} token/s（慢了 {1 / ratio:.1f}×）。猜测的接受率为 {acceptance:.0%}，"
                        f"主模型每步产出 {s['per_step']:.2f} 个 token，却要读 {k + 1} 个 token，"
                        f"还要等 {k} 次草稿前向（猜错后还得重放 DeltaNet 层）：随机的草稿一定更慢，"
                        "弱的草稿只要接受率低于盈亏平衡点也会更慢。去掉 --speculative 重新启动，就回到普通解码]"))
    return lines


def turn(chat, text, view):
    """Stream one reply, then its numbers; Ctrl-C stops it and the chat goes on as if the message was never sent."""
    pads = [s for s in PADS if s in text]
    if pads:
        print(tr(f"(not sent: {pads[0]} stands for the tokens of an image or video and cannot be typed; attach a "
                 "picture with /image PATH)",
                 f"（未发送：{pads[0]} 是图片或视频 token 的占位符，不能手动输入；附图片请用 /image PATH）"))
        return
    found = [s for s in chat.tok.special_tokens if s in text]
    if found:
        print(tr(f"(note: {', '.join(found)} in your message becomes the token itself, one id, not text, as with "
                 "Qwen's own tokenizer: the model reads a marker there)",
                 f"（注意：你消息里的 {'、'.join(found)} 会编码成这个特殊 token 本身，即一个 id，而不是普通文本；"
                 "Qwen 自己的分词器也是这样：模型在那里读到的是一个标记）"))
    dim, plain = ("\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "")
    before = chat.messages  # respond() replaces the list when, and only when, the turn joins
    try:
        print("qwen> ", end="", flush=True)
        for part, piece in chat.respond(text):
            if part == "think" and view == "hide":
                continue
            print(f"{dim}{piece}{plain}" if part == "think" else piece, end="", flush=True)
        s = chat.stats
        speed = tr(f", {s['decode_tok_s']:.1f} tokens/s", f"，每秒 {s['decode_tok_s']:.1f} 个 token") \
            if "decode_tok_s" in s else ""
        image = tr(f" ({s['image_tokens']} of them image tokens)", f"（其中 {s['image_tokens']} 个是图像 token）") \
            if s["image_tokens"] else ""
        reread = (tr(f"; {s['reread']} of the new ones re-read your last reply, which the template writes without "
                     "the thinking block it followed (empty with thinking off), so its cache could not be kept",
                     f"；其中 {s['reread']} 个是重读的上一条回复：模板重写这条回复时去掉了它前面的思考块"
                     "（关闭思考时思考块为空），所以它的缓存不能沿用")
                  if s["reread"] else "")
        print(tr(f"\n[{s['tokens']} tokens{speed}; prompt: {s['prompt']} new tokens{image} in {s['prefill_s']:.2f} s, "
                 f"{s['reused']} read from the cache{reread}]",
                 f"\n[{s['tokens']} 个 token{speed}；提示词：{s['prompt']} 个新 token{image}，"
                 f"用时 {s['prefill_s']:.2f} 秒；"
                 f"另有 {s['reused']} 个直接从缓存读取{reread}]"))
        if "steps" in s:
            for line in speculative_lines(s, chat.draft.k):
                print(line)
        if s["cut_thinking"]:
            print(tr(f"[the {chat.max_new_tokens}-token limit cut the reasoning: the reply is kept with an empty "
                     "answer; /limit N raises the limit]",
                     f"[推理达到 {chat.max_new_tokens} 个 token 的上限，被截断：这条回复以空答案保留；"
                     "/limit N 可以提高上限]"))
        elif s["cut"]:
            print(tr(f"[stopped at the {chat.max_new_tokens}-token limit; the reply is kept as it is; /limit N raises "
                     "it]",
                     f"[达到 {chat.max_new_tokens} 个 token 的上限，已停止；回复按原样保留；/limit N 可以提高上限]"))
    except KeyboardInterrupt:
        if chat.messages is before:
            kept = tr("; the attached image(s) stay for your next message", "；附加的图片留给你的下一条消息") \
                if chat.pending else ""
            print(tr(f"{plain} [stopped: your message and the partial reply are left out of the conversation{kept}]",
                     f"{plain} [已停止：你这条消息和已生成的部分回复都不计入对话{kept}]"))
        else:  # the reply had ended and joined; only its numbers were cut short
            print(tr(f"{plain} [the reply was complete and is kept]", f"{plain} [回复已经完整生成，保留在对话里]"))


def main(argv=None):
    try:
        return run(parse_args(argv))
    except KeyboardInterrupt:  # while loading, or between two steps of the loop
        print(tr("\n(interrupted) bye", "\n（已中断）再见"))
        return 130


def run(args):
    try:
        if args.speculative and args.presence_penalty:
            raise ValueError(tr(f"--presence-penalty {args.presence_penalty} cannot go with --speculative: this "
                                "chat's speculative decoding applies no penalty (it would have to penalise each "
                                "verified position by the drafts before it); drop one of the two",
                                f"--presence-penalty {args.presence_penalty} 不能和 --speculative 一起用："
                                "这个聊天程序的投机解码不施加任何惩罚"
                                "（要施加的话，每个验证位置都得按它前面的草稿 token 来惩罚）；"
                                "两个选项只能留一个"))
        device = torch.device(args.device) if args.device else pick_device()
        available = {"cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}
        if not available.get(device.type, True):
            raise ValueError(tr(f"--device {args.device}: this machine's torch has no such device; leave --device "
                                "out to use the fastest one it has",
                                f"--device {args.device}：这台机器上的 torch 没有这种设备；"
                                "去掉 --device，就会用这台机器上最快的设备"))
        checkpoint = open_model(args.model)
        if args.max_pixels is not None:  # its range is the checkpoint's: said now, not at the first picture
            budget_settings(checkpoint.image, args.max_pixels)
        tok = load_tokenizer(checkpoint.folder)
        synthetic = checkpoint.synthetic
        torch.set_num_threads(args.threads or (1 if synthetic else torch.get_num_threads()))
        model = load_fast(checkpoint, dtype=args.dtype, device=device, quant=args.quant,  # the fast path (chapter 9)
                          quiet=True)  # what a quantized model says is said below, once
        if args.speculative:
            p = model.norm.weight  # the MTP head, attached now: a checkpoint without one is refused here
            model.mtp = load_mtp(checkpoint, p.dtype, p.device)
    except (FileNotFoundError, ValueError, RuntimeError) as e:
        sys.exit(tr(f"error: {e}", f"错误：{e}"))
    if synthetic:
        print(tr("synthetic checkpoint: its weights are random, so every reply is random tokens. The code path is "
                 f"the real one; load the real model with --model {DEFAULT_MODEL} to talk.",
                 "合成检查点：权重是随机的，所以每条回复都是一串随机 token。代码路径和真实模型完全相同；"
                 f"想真正对话，请用 --model {DEFAULT_MODEL} 加载真实模型。"))
    thinking = default_thinking(checkpoint) if args.think is None else args.think
    overrides = {k: getattr(args, k) for k in [*CARD[False], "seed"]}
    if args.speculative:
        overrides["presence_penalty"] = 0.0
        off, on = CARD[False]['presence_penalty'], CARD[True]['presence_penalty']
        print(tr(f"--speculative {args.speculative}: the model card's presence penalty ({off}, thinking {on}) is off: "
                 "this chat's speculative decoding applies none (the method could: the verify pass knows the drafts "
                 "before each position it scores)",
                 f"--speculative {args.speculative}：模型卡里的存在惩罚（{off}，思考时 {on}）已关闭："
                 "这个聊天程序的投机解码不施加惩罚（方法本身是可以施加的：验证前向给每个位置打分时，"
                 "知道它前面有哪些草稿 token）"))
    draft = MTPDraft(model, args.speculative) if args.speculative else None
    chat = Session(model, tok, checkpoint, thinking or args.hide_thinking, overrides,
                   args.max_new_tokens or (48 if synthetic else 1024), args.system, draft)
    view = "hide" if args.hide_thinking else "dim"
    paste = line_editing()
    dtype = next(model.parameters()).dtype
    n = torch.get_num_threads()
    threads = "" if device.type != "cpu" else \
        tr(f", {n} CPU threads (--threads N)", f"，{n} 个 CPU 线程（--threads N）") if n > 1 else \
        tr(f", {n} CPU thread (--threads N)", f"，{n} 个 CPU 线程（--threads N）")
    name = next((name for name, d in DTYPES.items() if d == dtype), dtype)  # the first, short name: bf16
    state = tr("hidden", "开启，不打印推理过程") if view == "hide" else \
        tr("on", "开启") if chat.thinking else tr("off", "关闭")
    print(tr(f"{checkpoint.folder.name}: weights in {name} on {device}{threads}; thinking {state}; replies stop at "
             f"{chat.max_new_tokens} tokens (/limit N).",
             f"{checkpoint.folder.name}：权重为 {name}，运行在 {str(device).upper()} 上{threads}；思考{state}；"
             f"回复最多 {chat.max_new_tokens} 个 token（/limit N）。"))
    print(tr(f"commands: {commands(images=draft is None)}; /help says what each does. Ctrl-C stops a reply; Ctrl-D or "
             "/quit leaves.",
             f"命令：{commands(images=draft is None)}；/help 说明每条命令的作用。"
             "Ctrl-C 停止回复；Ctrl-D 或 /quit 退出。"))
    print(tr(f"numerics: {numerics(model)}", f"数值：{numerics(model)}"))
    if args.quant:
        print(tr(f"quantized: {describe(model)}", f"量化：{describe(model)}"))
        slow = slow_note(model)  # no packed kernel here: the cost said once, beside the line above
        if slow:
            print(slow)
    at_prompt_ctrl_c = False  # a second Ctrl-C in a row at the prompt leaves
    while True:
        try:
            text, block = read_message()
        except EOFError:
            print(tr("\nbye", "\n再见"))
            return 0
        except KeyboardInterrupt:
            if at_prompt_ctrl_c:
                print(tr("\nbye", "\n再见"))
                return 0
            at_prompt_ctrl_c = True
            print(tr("\n(Ctrl-C again leaves, as do Ctrl-D and /quit)",
                     "\n（再按一次 Ctrl-C 退出，Ctrl-D 和 /quit 也可以）"))
            continue
        at_prompt_ctrl_c = False
        text = text.strip()
        if not text:
            continue
        if text.startswith("/") and "\n" not in text and not block:
            view = command(chat, text, view, paste, args.max_pixels)
            if view is None:
                print(tr("bye", "再见"))
                return 0
            continue
        turn(chat, text, view)


if __name__ == "__main__":
    sys.exit(main())
