"""Plug your part into the whole model: run Qwen3.5 with your solution of an exercise in place of the course's
module and see what it does to the next-token prediction of a fixed prompt.

In a notebook:  from practice.plugin import plug_in; plug_in(204, rms_norm, gated_rms_norm, l2norm)
From a shell:   python practice/judge.py 204 --plug-in     (after an Accepted verdict; your file runs in a child
                process, under the limits it was graded with)
The model runs in fp32 on the synthetic checkpoint unless a model is given, so that a correct part changes the
logits by rounding only and the top-5 stays the same; a wrong part moves them. The prompt is longer than one
DeltaNet chunk (64 tokens) and not a multiple of it, so a chunked rule must carry its state across a chunk boundary
and pad the last chunk, as in any real prefill.
"""
import contextlib
import json
import os
import signal
import sys
from pathlib import Path

from practice import messages as say
from practice.events import OUT_OF_MEMORY, Garbled
from practice.limits import GRACE, LOAD_LIMIT, STARTUP_LIMIT
from practice.messages import cmd, speaking
from practice.notebook import namespace
from practice.problems import HERE, find_problem, problems
from practice.report import safe, size_text
from practice.store import work_dir
from practice.supervise import start_sandboxed, supervise
from qwen.lang import columns, language, tr

# torch and the course's model are imported inside the functions that run the model: the judge imports this module
# for its parent side (plug_in_file, below) and its commands that grade nothing start without torch

PROMPT = ("Paris is the capital of France, Berlin is the capital of Germany, Rome is the capital of Italy, Madrid is "
          "the capital of Spain, Lisbon is the capital of Portugal, Vienna is the capital of Austria, Athens is the "
          "capital of Greece, Warsaw is the capital of Poland, Dublin is the capital of Ireland, Oslo is the capital "
          "of Norway, Prague is the capital of the Czech Republic, and the capital of Japan is")  # 85 tokens
PLUGGABLE = tuple(int(f.parent.name[:3]) for f in sorted(HERE.glob("[0-9][0-9][0-9]_*/swaps.py")))
# the exercises that are a part of the model: each folder's swaps.py says where its functions go (PART, swaps)


def swaps(number, f, cfg):
    """(object, attribute, replacement) for each place the course's code gives way to the learner's functions `f`
    ({name: function}): exercise `number`'s swaps.py says which."""
    if number not in PLUGGABLE:
        raise ValueError(f"exercise {number} is not a part of the model; plug-in works for {list(PLUGGABLE)}")
    return problems()[number].load("swaps").swaps(f, cfg)


def part(number):
    """What exercise `number` makes of the model ("SwiGLU MLP"), as its swaps.py names it."""
    return problems()[number].load("swaps").PART


def projections(module, *names):
    """Each projection's weight by its checkpoint name; split back out of a joined one (qwen/fast.py's Joined, whose
    `joins` names its parts) where the module joins them. For the swaps of 207 and 208."""
    joined = {}
    for m in module.children():
        if getattr(m, "joins", None):
            joined.update(zip(m.joins, m.weight.split(m.sizes), strict=True))
    return [joined[n] if n in joined else getattr(module, n).weight for n in names]


def delta_rule(fn, repeat=False):
    """A learner's delta rule `fn` in the place of qwen.deltanet.chunked_delta_rule: fp32 in, the model's dtype out;
    `repeat`: q and k repeated to v's heads first (212 takes them so). For the swaps of 211 and 212."""
    def run(q, k, v, g, beta, state=None, chunk_size=64):
        if repeat:
            q, k = (x.repeat_interleave(v.shape[2] // k.shape[2], dim=2) for x in (q, k))
        out, state = fn(*(x.float() for x in (q, k, v, g, beta)), state)
        return out.to(v.dtype), state
    return run


@contextlib.contextmanager
def swapped(changes):
    """Each (object, attribute, replacement) of `changes` in place for the block; the course's own afterwards."""
    old = [(obj, name, getattr(obj, name)) for obj, name, _ in changes]
    try:
        for obj, name, new in changes:
            setattr(obj, name, new)
        yield
    finally:
        for obj, name, value in old:
            setattr(obj, name, value)


def top5(model, ids):
    import torch

    with torch.no_grad():
        p = model(ids)[0, -1].float().softmax(-1)
    top = p.topk(5)
    return top.indices.tolist(), top.values.tolist()


def plug_in(number, *functions, path=None, **named):
    """Run the model with the learner's functions for exercise `number`, given as check() takes them (functions,
    functools.partial, a namespace such as globals(), or name=function); print the two top-5 lists side by side and
    whether the prediction is the same. Returns "same prediction" or "diverges"; None, with one line, for an
    exercise that is not a part of the model or functions it cannot use."""
    prob = find_problem(number)
    if prob is None:
        return None
    if prob.number not in PLUGGABLE:
        print(tr(f"plug_in: exercise {prob.number} is not a part of the model; plug-in works for "
                 f"{say.joined(PLUGGABLE)}",
                 f"plug_in：第 {prob.number} 题不是模型部件；能接入模型的题目有 {say.joined(PLUGGABLE)}"))
        return None
    space, why = namespace(prob, functions, named)
    if why:
        print(why.replace("check()", "plug_in()"))
        return None
    return compare(prob.number, {n: space[n] for n in prob.functions if callable(space.get(n))}, *course_model(path))


def course_model(path=None):
    """(path, the model in fp32, its tokenizer, the prompt's ids, the course model's top-5 for them); the synthetic
    checkpoint unless `path` is given."""
    import torch

    from qwen.model import load_model
    from qwen.synthetic import synthetic_path
    from qwen.tokenizer import Tokenizer

    path = Path(path) if path else synthetic_path()
    model, tok = load_model(path, dtype=torch.float32), Tokenizer(path)
    ids = torch.tensor([tok.encode(PROMPT)])
    return path, model, tok, ids, top5(model, ids)


def compare(number, f, path, model, tok, ids, ours):
    """The model with the learner's functions `f` ({name: function}) in place of the course's, against `ours`."""
    from qwen.synthetic import is_synthetic

    yours_zh = say.joined(problems()[number].functions)  # the part by its functions: its name (PART) is English
    try:
        with swapped(swaps(number, f, model.cfg)):
            yours = top5(model, ids)
    except Exception as e:  # the learner's part may fail inside the model: one line, not a traceback
        first = (str(e).splitlines() or [""])[0][:300]
        limit = _memory_limit()
        if OUT_OF_MEMORY.search(f"{type(e).__name__}: {first}") and limit:
            print(tr(f"your {part(number)} ran out of memory inside the model: it asked for more than the judge "
                     f"allows ({limit}); the model's inputs need far less, so look for a tensor much larger than them",
                     f"你写的 {yours_zh} 在模型里耗尽了内存：申请的内存超过了评测器的上限（{limit}）。模型的输入"
                     f"远用不了这么多内存，找找有没有比输入大得多的张量"))
        else:
            print(tr(f"your {part(number)} raised {type(e).__name__} inside the model: {first}",
                     f"你写的 {yours_zh} 在模型里抛出了 {type(e).__name__}：{first}"))
        return "diverges"
    ending = "…" + PROMPT[-40:]
    print(tr(f"the whole model with your {part(number)} (exercise {number}), fp32, a prompt of {ids.shape[1]} tokens "
             f"ending {ending!r}", f"整个模型换上你写的 {yours_zh}（第 {number} 题），fp32，提示词共 {ids.shape[1]} "
             f"个 token，结尾是 {ending!r}")
          + (tr(" — synthetic weights: the tokens mean nothing, only the comparison does",
                "——合成权重：这些 token 本身没有意义，只看两边是否一致") if is_synthetic(path) else ""))
    left, right = tr("course model", "课程的模型"), tr("with your part", "换上你的部件")
    print(f"   {left}{' ' * (34 - columns(left))} {right}")
    def shown(token_id):  # a token's text, padded to 24 columns (a Chinese character takes two)
        text = repr(tok.decode([token_id]))
        return text + " " * (24 - columns(text))
    for (i, p), (j, q) in zip(zip(*ours), zip(*yours)):
        print(f"   {p:9.3g} {shown(i)} {q:9.3g} {shown(j)}{'' if i == j else '  <-'}".rstrip())
    if ours[0] == yours[0]:
        worst = max(abs(p - q) for p, q in zip(ours[1], yours[1]))
        print(tr(f"same prediction: the same top-5 in the same order (probabilities within {worst:.1g})",
                 f"预测相同：top-5 一致，顺序也一致（概率相差不超过 {worst:.1g}）"))
        return "same prediction"
    rank = next(r for r, (i, j) in enumerate(zip(ours[0], yours[0])) if i != j) + 1
    print(tr(f"diverges: your part changes the prediction from rank {rank} of the top-5 on",
             f"预测不同：从 top-5 的第 {rank} 名起，你的部件改变了预测"))
    return "diverges"


def _memory_limit():
    """The limit on this process's memory as text ("4 GiB") under the judge's sandbox; None without one."""
    try:
        import resource  # POSIX only
        limit = resource.getrlimit(resource.RLIMIT_DATA)[0]
    except (ImportError, ValueError, OSError):
        return None
    return None if limit == resource.RLIM_INFINITY else size_text(limit)


def main(number, file):
    """The child that `judge.py N --plug-in` starts in its sandbox: the course model first, then the learner's file,
    then the comparison. It reports each step to the judge, one JSON line on a private copy of stdout (ready,
    loaded, begin and ret around every call of the learner's functions, done), so the judge times every step on its
    own clock with the limits it grades with; what it prints goes to stderr, which the judge shows."""
    import torch

    torch.set_num_threads(1)  # the learner's code on one thread, as the runner runs it
    events = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # print() now writes to stderr

    def say(ev, **fields):
        events.write(json.dumps({"ev": ev, **fields}) + "\n")

    def timed(name, fn):
        def call(*args, **kwargs):
            say("begin", fn=name)
            try:
                return fn(*args, **kwargs)
            finally:
                say("ret")
        return call

    course = course_model()
    say("ready")
    from practice.runner import load_file  # the runner imports torch, which the judge's side of this module lacks

    module, failure = load_file(file)  # as the runner imports it for grading
    if failure:  # it compiled and loaded when graded: it changed since, or it depends on where it runs
        print(failure.get("msg") or failure.get("tb"))
        return 1
    say("loaded")
    yours = {n: timed(n, getattr(module, n)) for n in problems()[number].functions}
    same = compare(number, yours, *course) == "same prediction"
    say("done", same=same)
    return 0 if same else 1


# ---------------------------------------------------------------- the judge's side: the child under supervision

class PlugProtocol:
    """The plug-in child's events (plugin.main) in their one order: ready (the course model is loaded), loaded (the
    learner's file is imported), then begin (with one of the exercise's function names) and ret around each call of
    the learner's functions, then done (with same: true or false) after at least one call. Anything else raises
    Garbled, as Protocol does for the runner."""

    def __init__(self, functions):
        self.functions, self.state, self.fn = list(functions), "start", "function"

    def accept(self, ev):
        if not isinstance(ev, dict):
            raise Garbled(tr("a line that is not an event", "收到的一行不是事件"))
        kind, st = ev.get("ev"), self.state
        if (st, kind) in (("start", "ready"), ("ready", "loaded")):
            self.state = kind
        elif st in ("loaded", "returned") and kind == "begin" and ev.get("fn") in self.functions:
            self.state, self.fn = "inside", ev["fn"]
        elif st == "inside" and kind == "ret":
            self.state = "returned"
        elif st == "returned" and kind == "done" and type(ev.get("same")) is bool:
            self.state = "over"
            return {"ev": kind, "same": ev["same"]}
        else:
            shown = str(kind)[:20]
            raise Garbled(tr(f"an event {shown!r} where the judge expected {self._expected()}",
                             f"收到事件 {shown!r}，评测器此时等待的是：{self._expected()}"))
        return {"ev": kind}

    def _expected(self):
        return {"start": "'ready'", "ready": "'loaded'", "loaded": tr("a call of your functions", "调用你的函数"),
                "inside": tr(f"the return of your {self.fn}", f"你的 {self.fn} 返回"),
                "returned": tr("another call, or 'done'", "下一次调用或 'done'")}.get(
            self.state, tr("nothing more", "不再有任何事件"))


def plug_in_allowed(prob, lang=None):
    """True for an exercise that is a part of the model; else one line, with the parts and the command to grade it
    without --plug-in."""
    if prob.number in PLUGGABLE:
        return True
    with speaking(lang):
        print(say.plug_not_part(prob.number, PLUGGABLE, cmd(prob.number)), file=sys.stderr)
    return False


def plug_in_file(number, file, lang=None):
    """The plug-in mode (practice/plugin.py) with the learner's file in a child process, under the limits it was
    graded with: the sandbox (memory, processes, a reaper) and the supervision loop of grading, with a deadline for
    each wait after the child's last event (PlugProtocol): Python, torch and the course model get STARTUP_LIMIT,
    importing the file LOAD_LIMIT, each call of the learner's functions the problem's time limit (+ GRACE), the
    course's own code between calls STARTUP_LIMIT. Past one, everything is stopped and one line says which. Returns
    the exit code: 0 for the same prediction, 1 otherwise, 2 for an exercise that is not a part of the model. It
    speaks `lang` (None: the language already chosen), and so does the child."""
    with speaking(lang):
        return _plug_in_file(number, file)


def _plug_in_file(number, file):
    prob = find_problem(number)
    if prob is None or not plug_in_allowed(prob):
        return 2
    path = Path(file) if file else work_dir() / prob.work_name
    waits = {"start": STARTUP_LIMIT, "ready": LOAD_LIMIT, "loaded": STARTUP_LIMIT, "returned": STARTUP_LIMIT,
             "inside": prob.time_limit + GRACE, "over": LOAD_LIMIT}  # over: only its exit is left
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent)] + [p for p in [os.environ.get("PYTHONPATH")]
                                                                            if p]), QWEN_LANG=language())
    print(say.plug_banner(prob.number), flush=True)
    proto = PlugProtocol(prob.functions)
    proc = start_sandboxed([sys.executable, str(HERE / "plugin.py"), str(prob.number), str(path.resolve())],
                            prob.memory_limit, env=env)
    seen = supervise(proc, proto, lambda ev: (waits[proto.state], None))
    for line in seen.output.decode("utf-8", "replace").splitlines():
        print(safe(line))
    if seen.output_bytes > len(seen.output):
        print(say.printed(size_text(seen.output_bytes), size_text(len(seen.output))))
    done = next((ev for ev in seen.events if ev["ev"] == "done"), None)
    if done is not None and seen.garbled is None:
        return 0 if done["same"] else 1
    if seen.garbled:
        why = say.garbled(seen.garbled)
    elif seen.stopped:
        why = say.plug_over(seen.stopped, waits[seen.stopped], proto.fn, prob.number, prob.time_limit)
    elif seen.rc < 0:
        why = say.plug_died(say.oom_kill() if seen.rc == -signal.SIGKILL else say.signal_name(-seen.rc))
    else:
        return 1  # it raised: its traceback is printed above
    print(say.plug_stopped(why), file=sys.stderr)
    return 1


if __name__ == "__main__":  # the child: run as practice.plugin, the module the problems' swaps.py import
    from practice.plugin import main as child

    sys.exit(child(int(sys.argv[1]), sys.argv[2]))
