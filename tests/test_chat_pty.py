"""The chat in a pseudo-terminal, as a person meets it: readline's line editor and history, a 20,000-character line
(a terminal's own line editor stops at 4,095), a paste of three lines, Ctrl-C in the first prefill and in decoding,
Ctrl-C twice and Ctrl-D at the prompt. The chat runs in a child process on the synthetic checkpoint, through
HARNESS below: a message that says PAUSE-PREFILL or PAUSE-DECODE makes that model call print <paused> and wait for
Ctrl-C, so the interrupt lands where the test means it to, with no guessed sleeps.
/help lists one command a line; /image piles pictures up for the next message, lists them and drops them;
--speculative leaves /image out of what the chat offers, and says how its speed compares with plain decoding.
Run: pytest -q tests/test_chat_pty.py (POSIX only; two chat sessions, mostly their start-up: one with the default
options that three tests read, one with --speculative)."""
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from helpers import ROOT, shared_once

pty = pytest.importorskip("pty", reason="pseudo-terminals are POSIX only")
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX only")

HARNESS = r'''
import sys, time
import app.chat as cli

class Paused:
    """The chat's model, except that the call a message asks for prints <paused> and waits for Ctrl-C."""
    def __init__(self, model):
        self.model, self.pause, self.decodes = model, None, 0

    def __getattr__(self, name):  # parameters(), new_cache(), visual: the model's own
        return getattr(self.model, name)

    def __setattr__(self, name, value):  # model.visual = load_vision(...) attaches the tower to the model itself
        if name in ("model", "pause", "decodes"):
            object.__setattr__(self, name, value)
        else:
            setattr(self.model, name, value)

    def __call__(self, ids, **kw):
        self.decodes += ids.shape[1] == 1
        if self.pause == "prefill" or (self.pause == "decode" and self.decodes == 3):
            self.pause = None
            print("<paused>", flush=True)
            time.sleep(60)  # Ctrl-C ends it
        return self.model(ids, **kw)

respond = cli.Session.respond
def paused_respond(self, text):
    self.model = self.model if isinstance(self.model, Paused) else Paused(self.model)
    self.model.pause = "prefill" if "PAUSE-PREFILL" in text else "decode" if "PAUSE-DECODE" in text else None
    self.model.decodes = 0
    return respond(self, text)
cli.Session.respond = paused_respond
sys.exit(cli.main(sys.argv[1:]))
'''


class Terminal:
    """`python main.py chat` on the synthetic checkpoint in a pseudo-terminal of 200 columns."""

    def __init__(self, *args):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TERM": "xterm"}
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: becomes the chat, with the terminal as its controlling tty
            os.chdir(ROOT)
            # Ctrl-C as a person's terminal delivers it, however the tests were started: a shell that runs a job in
            # the background (`cmd &`) ignores SIGINT, the child would inherit that, and Python keeps an ignored one
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.execve(sys.executable, [sys.executable, "-c", HARNESS, "--model", "synthetic", "--seed", "1",
                                       "--max-new-tokens", "5", *args], env)
        import fcntl
        import struct
        import termios
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        self.out, self.seen = bytearray(), 0
        threading.Thread(target=self.read, daemon=True).start()  # always drain the output, or the child blocks

    def read(self):
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # the child is gone
                return
            if not data:
                return
            self.out.extend(data)

    def expect(self, marker, timeout=120):
        """Wait until `marker` appears after what was seen so far; returns the text up to and including it."""
        end = time.time() + timeout
        while (at := self.out.find(marker.encode(), self.seen)) < 0:
            assert time.time() < end, f"no {marker!r} in {self.out[self.seen:][-2000:].decode(errors='replace')!r}"
            time.sleep(0.01)
        text, self.seen = self.out[self.seen:at + len(marker)].decode(errors="replace"), at + len(marker)
        return text

    def send(self, text):
        data = text.encode()
        for i in range(0, len(data), 1024):
            os.write(self.fd, data[i:i + 1024])

    def turn(self, text):
        """Send a message; returns everything printed up to the next prompt."""
        self.send(text)
        return self.expect("you> ")

    def exit_code(self):
        end = time.time() + 60
        while time.time() < end:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.05)
        os.kill(self.pid, 9)
        raise AssertionError("the chat did not exit")


def printed(text):
    """What the chat printed, one entry a line: the terminal's control sequences, the echo of the typed line (up to
    the first line break) and blank lines left out."""
    text = re.sub(r"\x1b\[[?0-9;]*[A-Za-z]", "", text).replace("\r", "")
    return [line.rstrip() for line in text.split("\n")[1:] if line.strip() and line.strip() != "you>"]


# every command the chat carries out (app/chat.py's command()), each given its own line in /help
DISPATCHED = ["/image", "/reset", "/think", "/limit", "/history", "/help", "/quit"]


def one_session(pictures):
    """One chat in a terminal with the default options, for the three tests below: Ctrl-C in its very first prefill
    and in a later decoding step, /reset, then long lines, line editing, a paste, /history and a picture, then /image
    piling pictures up and dropping them, and Ctrl-C twice at the prompt to leave. What it printed at each step (each
    step waits for the next prompt, as a person does), its exit code and the whole transcript."""
    from PIL import Image

    Image.new("RGB", (40, 40), (200, 30, 30)).save(pictures / "a red square.png")
    Image.new("RGB", (100, 70), (200, 30, 30)).save(pictures / "wide.png")
    Image.new("RGB", (40, 40), (30, 30, 200)).save(pictures / "square.png")
    t, seen = Terminal(), {"pictures": str(pictures)}
    seen["banner"] = t.expect("you> ")
    seen["help"] = t.turn("/help\r")
    # Ctrl-C in prefill and in decoding
    t.send("PAUSE-PREFILL hello\r")  # the very first prefill: it used to crash
    t.expect("<paused>")
    t.send("\x03")
    seen["prefill stopped"] = t.expect("you> ")
    seen["history, none"] = t.turn("/history\r")
    seen["first"] = t.turn("first\r")
    seen["history, first"] = t.turn("/history\r")
    t.send("PAUSE-DECODE second\r")  # the third decoding step of a later turn
    t.expect("<paused>")
    t.send("\x03")
    seen["decode stopped"] = t.expect("you> ")
    seen["history, stopped"] = t.turn("/history\r")
    seen["third"] = t.turn("third\r")
    seen["history, third"] = t.turn("/history\r")
    seen["reset"] = t.turn("/reset\r")
    # typing long lines and a paste
    seen["long"] = t.turn("x" * 20000 + "\r")
    t.turn("abc\x1b[D\x1b[DY\x1b[CZ\r")  # left, left, Y, right, Z: aYbZc
    t.turn("\x1b[A\r")  # up: the line before, sent again
    seen["paste"] = t.turn("\x1b[200~first line\rsecond line\rthird line\r\x1b[201~\r")  # a terminal's marked paste
    seen["thinking on"] = t.turn("/thinking on\r")
    seen["history, typed"] = t.turn("/history\r")
    seen["red square"] = t.turn(f"/image '{pictures / 'a red square.png'}'\r")  # quoted, as a dropped file comes
    seen["what is it"] = t.turn("What is it?\r")
    # /image piling pictures up
    seen["image, none"] = t.turn("/image\r")
    seen["image, wide"] = t.turn(f"/image {pictures / 'wide.png'}\r")
    seen["image, square"] = t.turn(f"/image {pictures / 'square.png'}\r")
    seen["image, two"] = t.turn("/image\r")
    seen["image drop"] = t.turn("/image drop\r")
    seen["image, none again"] = t.turn("/image\r")
    seen["hello"] = t.turn("hello\r")
    t.send("\x03")
    seen["ctrl-c once"] = t.expect("you> ")
    t.send("\x03")
    t.expect("bye")
    seen["exit code"] = t.exit_code()
    seen["transcript"] = t.out.decode(errors="replace")
    return seen


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """one_session, run once per test run (shared by the workers)."""
    return shared_once(tmp_path_factory, "chat-pty-session", lambda: one_session(tmp_path_factory.mktemp("pty")))


@pytest.mark.slow
def test_typing_long_lines_and_a_paste(session):
    assert "\x1b[?2004h" in session["banner"]  # bracketed paste on
    assert "a paste of several lines is one message" in session["help"]
    assert "(new conversation)" in session["reset"]
    out = session["long"]
    assert out.count("qwen> ") == 1 and "tokens/s" in out
    assert session["paste"].count("qwen> ") == 1  # one message, one reply
    out = session["thinking on"]
    assert "'/thinking on' is not one of the commands: /image [PATH | drop], /reset, /think on|off|hide" in out
    listed = session["history, typed"].splitlines()
    users = [line.split(None, 2)[2] for line in listed if line.split()[1:2] == ["user"]]
    assert users == ["20000 characters: " + repr("x" * 40) + "…", "5 characters: 'aYbZc'", "5 characters: 'aYbZc'",
                     "33 characters in 3 lines: 'first line\\nsecond line\\nthird line'"]
    # 40 × 40 grows by √(65536 / 1600) = 6.4 to 256 × 256: 8 × 8 tokens
    assert "[image 256×256 → 64 tokens" in session["red square"]
    assert "(64 of them image tokens)" in session["what is it"]
    assert "Ctrl-C again leaves" in session["ctrl-c once"]
    assert session["exit code"] == 0
    text = session["transcript"]
    assert "^[[" not in text and "Traceback" not in text  # the arrows moved the cursor, nothing crashed


@pytest.mark.slow
def test_ctrl_c_in_prefill_and_in_decoding(session):
    out = session["prefill stopped"]
    assert "[stopped: your message and the partial reply are left out" in out and "tokens" not in out
    assert "(no messages yet)" in session["history, none"]
    out = session["first"]
    assert "tokens/s" in out and ", 0 read from the cache]" in out
    kept = int(session["history, first"].split("(the kept cache has read ")[1].split()[0])
    out = session["decode stopped"]
    assert "[stopped:" in out and "tokens/s" not in out  # no statistics, neither this turn's nor the last one's
    listed = session["history, stopped"]
    assert "'first'" in listed and "PAUSE" not in listed and "  3 " not in listed
    out = session["third"]
    assert "tokens/s" in out and f", {kept} read from the cache; " in out  # the cache from before "second"
    assert "'third'" in session["history, third"]
    assert session["exit code"] == 0 and "Traceback" not in session["transcript"]


@pytest.mark.slow
def test_help_one_line_per_command_and_pending_pictures(session):
    pictures = Path(session["pictures"])
    assert "commands: /image [PATH | drop], /reset, /think on|off|hide, /limit N, /history, /help, /quit" in \
        session["banner"]
    listed = [line.strip() for line in printed(session["help"])]
    for name in DISPATCHED:
        lines = [line for line in listed if line.split()[:1] == [name]]
        assert lines, name
        assert all(len(line.split("  ")) >= 2 for line in lines)  # usage, then what it does, on the same line
    assert [line.split("  ")[0] for line in listed if line.startswith("/image")] == [
        "/image PATH", "/image PATH --max-pixels N", "/image", "/image drop"]
    assert "(no pictures pending" in session["image, none"]
    # by hand: 100 × 70 -> 320 × 224 (√(65536 / 7000) = 3.06, up to multiples of 32), 10 × 7 tokens; 40 × 40 ->
    # 256 × 256, 8 × 8 tokens; together 134
    assert "[image 320×224 → 70 tokens; resized from 100×70" in session["image, wide"]
    assert "2 pictures pending for your next message, 134 image tokens" in session["image, square"]
    assert [line.strip() for line in printed(session["image, two"])] == [
        "pending for your next message: 2 pictures, 134 image tokens",
        f"1. {pictures / 'wide.png'}: 100×70, read as 320×224: 70 image tokens",
        f"2. {pictures / 'square.png'}: 40×40, read as 256×256: 64 image tokens", "(/image drop drops them)"]
    assert "(2 pictures dropped; none pending)" in session["image drop"]
    assert "(no pictures pending" in session["image, none again"]
    out = session["hello"]
    assert "tokens/s" in out and "image tokens" not in out  # the message went without them
    assert session["exit code"] == 0 and "Traceback" not in session["transcript"]


@pytest.mark.slow
def test_speculative_leaves_images_out(tmp_path):
    from PIL import Image

    Image.new("RGB", (40, 40)).save(tmp_path / "square.png")
    t = Terminal("--speculative", "2")
    banner = t.expect("you> ")
    assert "commands: /reset, /think on|off|hide, /limit N, /history, /help, /quit;" in banner
    assert "/image" not in banner
    out = t.turn("/help\r")
    assert "/image" not in out and "Pictures cannot go with --speculative: restart without it to attach one." in out
    assert printed(t.turn(f"/image {tmp_path / 'square.png'}\r")) == [
        "/image: pictures cannot go with --speculative (this chat's speculative decoding takes text only): restart "
        "the chat without --speculative to attach one"]
    out = t.turn("hello\r")
    assert "[speculative, 2 guesses per step: " in out
    assert "this draft slows decoding down" in out or "× plain decoding's" in out  # which one is the machine's
    t.send("\x04")
    t.expect("bye")
    assert t.exit_code() == 0 and "Traceback" not in t.out.decode(errors="replace")
