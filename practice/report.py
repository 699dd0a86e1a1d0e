"""How a grading is shown: short, labelled lines, in English or Chinese (the texts: messages.py). No torch at import
(list/show stay fast).

Every line goes through `safe`: the learner's output and messages can hold terminal escape sequences, which are
shown escaped (\\x1b[8A), so no file can move the cursor and rewrite the verdict on screen."""
import re
import signal
from pathlib import Path

from practice import messages as say
from practice.guard import REFERENCES
from practice.messages import speaking
from qwen.lang import columns, language, tr

SHOW_OUTPUT = 20  # lines of it shown with a verdict that is not Accepted
BLOCK_LINES = 60  # lines of a traceback or compile error shown (the runner already collapses repeated frames)
LINE_CHARS = 300  # characters of one such line

# C0 and C1 control characters (but tab), DEL, and the bidirectional overrides that reorder what a line shows
UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def safe(text):
    """`text` with every control character shown as an escape: '\x1b[8A' prints as the 7 characters \\x1b[8A."""
    return UNSAFE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                      else f"\\u{ord(m.group()):04x}", text)


def size_text(n):
    """Binary units, named as such (the course's MB and GB elsewhere are 10**6 and 10**9 bytes)."""
    if n >= 2 ** 30:
        return f"{n / 2 ** 30:.3g} GiB"
    return f"{n / 2 ** 20:.1f} MiB" if n >= 2 ** 20 else f"{n / 1024:.0f} KiB" if n >= 1024 else tr(
        f"{n} bytes", f"{n} 字节")


class Printer:
    """Shows a Report in `lang` (None: the language already chosen), each line through `out`."""

    def __init__(self, lang=None, out=print):
        self.lang = lang
        self.out = lambda text: out("\n".join(safe(ln) for ln in str(text).split("\n")))

    def line(self, key, value=""):
        label = say.label(key)
        self.out(f"{label}{' ' * max(1, 10 - columns(label))}{value}".rstrip())

    def block(self, text):
        lines = text.splitlines()
        for ln in lines[:BLOCK_LINES]:
            self.out("  " + (ln if len(ln) <= LINE_CHARS else ln[:LINE_CHARS] + " …"))
        if len(lines) > BLOCK_LINES:
            self.out("  " + say.more_lines(len(lines) - BLOCK_LINES))

    def report(self, rep, shown_file, again_cmd, progress_file):
        with speaking(self.lang):
            self._report(rep, shown_file, again_cmd, progress_file)

    def _report(self, rep, shown_file, again_cmd, progress_file):
        prob = rep.problem
        self.line("problem", f"{prob.number} · {prob.title(language())}")
        self.line("file", shown_file)
        if rep.verdict == "JE":
            self.out(say.judge_error(rep.outcome.detail))
            self.block(rep.output.decode("utf-8", "replace")[-3000:])
            return
        if rep.outcome is not None:  # decided before any case ran, or the run ended between two
            self.line("verdict", say.verdict(rep.verdict))
            self._message(rep)
        else:
            self._cases(rep)
            failure = rep.failure
            if failure is None:
                self.line("verdict", say.verdict("AC"))
            else:
                self._failure(rep, failure)
            self.line("passed", say.summary(rep.passed, len(rep.results), rep.seconds))
        self._output(rep)
        if rep.verdict == "AC":
            self.out(say.all_passed(len(rep.results), progress_file))
        elif again_cmd:
            self.out(say.again(again_cmd))

    def label(self, case):
        return say.case_label(case.label)

    def _cases(self, rep):
        """One row a case; each column as wide as its longest entry (212's chunked_delta_rule, 213's hidden layer 1)."""
        def pad(text, column):
            return text + " " * (column - columns(text))
        rows = [(r, self.label(r.case), r.case.fn, say.verdict(r.verdict)) for r in rep.results]
        labels, fns, verdicts = (max((columns(row[k]) for row in rows), default=0) + 2 for k in (1, 2, 3))
        for i, (r, label, fn, verdict) in enumerate(rows, 1):
            mark = {"AC": "✓", None: "·"}.get(r.verdict, "✗")
            t = f"{r.time * 1000:9.2f} ms" if r.time is not None else ""
            self.out(f"  {mark} {i:>2}  {pad(label, labels)}{pad(fn, fns)}{pad(verdict, verdicts)}{t}".rstrip())

    def _message(self, rep):
        o = rep.outcome
        if o.kind == "missing":
            self.line("error", say.missing(o.detail))
        elif o.kind == "answer":
            self.line("error", self._answer(o.detail, rep.problem.functions))
        elif o.kind == "load_time":
            self.line("error", say.tle_load(rep.load_limit))
        elif o.kind == "compile_error":
            self.line("error")
            self.block(o.detail)
        elif o.kind == "raised":  # an error at import time
            self._traceback(o, say.load_error())
        else:  # died_load, died_between, garbled, stalled
            self.line("error", self._why(o))

    def _traceback(self, o, label=""):
        """A traceback under an Error line; a hint when it ended in sys.exit."""
        self.line("error", label)
        self.block(o.detail)
        if o.exit is not None:
            self.line("hint", say.sysexit(o.exit))

    def _how(self, rc):
        """An exit status in words: a negative one is the signal that ended the process."""
        if rc >= 0:
            return say.exit_code(rc)
        if -rc == signal.SIGKILL:
            return say.oom_kill()
        try:
            sig = signal.Signals(-rc).name
        except (ValueError, AttributeError):
            sig = -rc
        return say.signal_name(sig)

    def _answer(self, hits, functions):
        """What the file used: a reference library (transformers, gguf), the answer, or a module that imports the answer
        ("qwen.model>qwen.mlp"); the kind of the first hit says which, and each hit of that kind is named."""
        kinds = ["answer_reference" if h.split(">")[-1].split(".")[0] in REFERENCES else
                 "answer_via" if ">" in h else "answer" for h in hits]
        same = [h.split(">") for h, k in zip(hits, kinds) if k == kinds[0]]
        return say.answer(kinds[0], functions, [h[0] for h in same], [h[-1] for h in same])

    def _why(self, o):
        """The line for a run that ended abnormally: it died (in a case, loading, between cases), its events were
        garbled, or it stalled where no code of the learner's was running."""
        if o.kind == "garbled":
            return say.garbled(o.detail)
        if o.kind == "stalled":
            return say.stalled(o.detail == "returned")
        return say.died(o.kind, self._how(o.detail))

    def _failure(self, rep, r):
        from practice.grading import describe  # grading imports torch: only when a case failed

        case = r.case
        idx = rep.results.index(r) + 1
        name = say.case_name(self.label(case), case.seed, case.note)
        self.line("verdict", say.on_case(say.verdict(r.verdict), idx, name))
        self.line("call", case.call_text())
        if r.verdict == "TLE":
            if r.outcome is not None and r.outcome.kind == "total":
                self.line("error", say.tle_total(rep.total_limit, len(rep.results)))
                self.line("limit", say.limits(rep.time_limit, rep.total_limit))
            else:
                self.line("error", say.tle_slow(r.time) if r.time is not None else say.tle_killed(rep.time_limit))
                self.line("limit", say.seconds(rep.time_limit))
        elif r.verdict == "RE":
            if r.outcome.kind == "raised":
                self._traceback(r.outcome)
            else:  # died, garbled, stalled
                self.line("error", self._why(r.outcome))
        elif r.mismatch is None:  # the right answer, but the input was changed in place
            self.line("error", say.mutated())
        else:
            mm, info = r.mismatch, r.mismatch.info
            if mm.kind == "text":  # a string: where it first differs, and the text around it in both
                if mm.where != "output":
                    self.line("where", mm.where)
                self.line("first", say.first_char(info["first"], info["n_exp"], info["n_got"]))
                self.line("expected", info["expected"])
                self.line("got", info["got"])
            elif mm.where == "output":
                self.line("expected", describe(case.expected))
                self.line("got", describe(r.got))
            else:  # inside a dict or tuple: say where, then what differs there
                self.line("where", mm.where)
            if mm.kind == "value":
                self.line("maxdiff", say.max_diff(_num(info["max_abs"]), info["nan"], info["n_bad"], info["n"]))
                e, g = _pair(info["exp_at"], info["got_at"])
                self.line("first", say.first_index(tuple(info["first"]), e, g))
                self.line("tol", info["tol"])
            elif mm.kind == "keys":
                if info["missing"]:
                    self.line("error", say.keys_missing(_keys(info["missing"])))
                if info["extra"]:
                    self.line("error", say.keys_extra(_keys(info["extra"])))
            elif mm.kind == "type" and info.get("expected") == "torch.Tensor":
                self.line("error", say.not_dense(info["got"]))
            elif mm.kind in ("shape", "dtype", "len", "type"):
                if mm.where != "output" or mm.kind == "len":  # at the top the two lines above said it
                    self.line("expected", say.value_of(mm.kind, info["expected"]))
                    self.line("got", say.value_of(mm.kind, info["got"]))
                if mm.kind == "len" and "first" in info:  # a list: the items around its first difference
                    self.line("first", say.first_item(info["first"], info["exp_at"], info["got_at"]))
            elif mm.kind == "text":
                pass
            else:
                self.line("expected", info["expected"])
                self.line("got", info["got"])
            if r.mutated:
                self.line("error", say.mutated())
        for key in r.hints:
            if key == "not_implemented":
                text = say.hint_not_implemented()
            elif key == "out_of_memory":
                text = say.hint_out_of_memory(size_text(rep.memory_limit * 2 ** 20))
            elif key == "wrong_dtype":
                mm = r.mismatch
                dtype = mm.info["expected"] if mm is not None and mm.kind == "dtype" else \
                    describe(case.expected).split("[")[0]
                text = say.hint_wrong_dtype(dtype)
            else:
                text = rep.problem.hint_text(key, language()) or key
            self.line("hint", text)

    def _output(self, rep):
        if not rep.output_bytes:
            return
        cut = rep.output_bytes > len(rep.output)
        if rep.verdict != "AC":
            lines = rep.output.decode("utf-8", "replace").splitlines()
            self.line("output")
            for ln in lines[:SHOW_OUTPUT]:
                self.out("  | " + ln[:200])
            cut = cut or len(lines) > SHOW_OUTPUT
        if cut:
            self.out(say.printed(size_text(rep.output_bytes), size_text(len(rep.output))))


def _pair(e, g):
    """Two numbers with enough significant digits to tell them apart (6 unless they need more, at most 17)."""
    if not (isinstance(e, float) and isinstance(g, float)) or e != e or g != g:
        return _num(e), _num(g)
    for digits in range(6, 18):
        a, b = f"{e:.{digits}g}", f"{g:.{digits}g}"
        if a != b:
            return a, b
    return a, b


def _num(x):
    if isinstance(x, float):
        return "nan" if x != x else f"{x:.6g}"
    return str(x)


def _keys(keys):
    shown = say.joined(repr(k) for k in keys[:4])
    return shown + (f" … (+{len(keys) - 4})" if len(keys) > 4 else "")


def shown_path(path):
    """The path relative to the current folder when it lies inside it, else absolute."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
