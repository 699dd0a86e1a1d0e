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

from practice.events import OUT_OF_MEMORY, Garbled
from practice.limits import GRACE, LOAD_LIMIT, STARTUP_LIMIT
from practice.messages import MSG, cmd
from practice.notebook import namespace
from practice.problems import HERE, find_problem, problems
from practice.report import safe, size_text
from practice.store import work_dir
from practice.supervise import start_sandboxed, supervise

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
    prob = find_problem(number, "en")
    if prob is None:
        return None
    if prob.number not in PLUGGABLE:
        print(f"plug_in: exercise {prob.number} is not a part of the model; plug-in works for "
              f"{', '.join(map(str, PLUGGABLE))}")
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

    try:
        with swapped(swaps(number, f, model.cfg)):
            yours = top5(model, ids)
    except Exception as e:  # the learner's part may fail inside the model: one line, not a traceback
        first = (str(e).splitlines() or [""])[0][:300]
        limit = _memory_limit()
        if OUT_OF_MEMORY.search(f"{type(e).__name__}: {first}") and limit:
            print(f"your {part(number)} ran out of memory inside the model: it asked for more than the "
                  f"judge allows ({limit}); the model's inputs need far less, so look for a tensor much larger "
                  f"than them")
        else:
            print(f"your {part(number)} raised {type(e).__name__} inside the model: {first}")
        return "diverges"
    print(f"the whole model with your {part(number)} (exercise {number}), fp32, a prompt of {ids.shape[1]} tokens "
          f"ending {'…' + PROMPT[-40:]!r}"
          + (" — synthetic weights: the tokens mean nothing, only the comparison does" if is_synthetic(path) else ""))
    print(f"   {'course model':34s} {'with your part':34s}")
    for (i, p), (j, q) in zip(zip(*ours), zip(*yours)):
        print(f"   {p:9.3g} {tok.decode([i])!r:24s} {q:9.3g} {tok.decode([j])!r:24s}{'' if i == j else '  <-'}")
    if ours[0] == yours[0]:
        worst = max(abs(p - q) for p, q in zip(ours[1], yours[1]))
        print(f"same prediction: the same top-5 in the same order (probabilities within {worst:.1g})")
        return "same prediction"
    first = next(r for r, (i, j) in enumerate(zip(ours[0], yours[0])) if i != j)
    print(f"diverges: your part changes the prediction from rank {first + 1} of the top-5 on")
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
            raise Garbled("a line that is not an event")
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
            raise Garbled(f"an event {str(kind)[:20]!r} where the judge expected {self._expected()}")
        return {"ev": kind}

    def _expected(self):
        return {"start": "'ready'", "ready": "'loaded'", "loaded": "a call of your functions",
                "inside": f"the return of your {self.fn}", "returned": "another call, or 'done'"}.get(
            self.state, "nothing more")


def plug_in_allowed(prob, lang):
    """True for an exercise that is a part of the model; else one line, with the parts and the command to grade it
    without --plug-in."""
    if prob.number in PLUGGABLE:
        return True
    print(MSG[lang]["plug_not_part"].format(n=prob.number, parts=", ".join(map(str, PLUGGABLE)),
                                            cmd=cmd(prob.number)), file=sys.stderr)
    return False


def plug_in_file(number, file, lang="en"):
    """The plug-in mode (practice/plugin.py) with the learner's file in a child process, under the limits it was
    graded with: the sandbox (memory, processes, a reaper) and the supervision loop of grading, with a deadline for
    each wait after the child's last event (PlugProtocol): Python, torch and the course model get STARTUP_LIMIT,
    importing the file LOAD_LIMIT, each call of the learner's functions the problem's time limit (+ GRACE), the
    course's own code between calls STARTUP_LIMIT. Past one, everything is stopped and one line says which. Returns
    the exit code: 0 for the same prediction, 1 otherwise, 2 for an exercise that is not a part of the model."""
    m = MSG[lang]
    prob = find_problem(number, lang)
    if prob is None or not plug_in_allowed(prob, lang):
        return 2
    path = Path(file) if file else work_dir() / prob.work_name
    waits = {"start": STARTUP_LIMIT, "ready": LOAD_LIMIT, "loaded": STARTUP_LIMIT, "returned": STARTUP_LIMIT,
             "inside": prob.time_limit + GRACE, "over": LOAD_LIMIT}  # over: only its exit is left
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent)] + [p for p in [os.environ.get("PYTHONPATH")]
                                                                            if p]))
    print(m["plug_banner"].format(n=prob.number), flush=True)
    proto = PlugProtocol(prob.functions)
    proc = start_sandboxed([sys.executable, str(HERE / "plugin.py"), str(prob.number), str(path.resolve())],
                            prob.memory_limit, env=env)
    seen = supervise(proc, proto, lambda ev: (waits[proto.state], None))
    for line in seen.output.decode("utf-8", "replace").splitlines():
        print(safe(line))
    if seen.output_bytes > len(seen.output):
        print(m["printed"].format(size=size_text(seen.output_bytes), cap=size_text(len(seen.output))))
    done = next((ev for ev in seen.events if ev["ev"] == "done"), None)
    if done is not None and seen.garbled is None:
        return 0 if done["same"] else 1
    if seen.garbled:
        why = m["garbled"].format(why=seen.garbled)
    elif seen.stopped:
        why = m["plug_" + seen.stopped].format(t=waits[seen.stopped], fn=proto.fn, n=prob.number,
                                               limit=prob.time_limit)
    elif seen.rc < 0:
        why = m["plug_died"].format(how=m["oom_kill"] if seen.rc == -signal.SIGKILL else f"signal {-seen.rc}")
    else:
        return 1  # it raised: its traceback is printed above
    print(m["plug_stopped"].format(why=why), file=sys.stderr)
    return 1


if __name__ == "__main__":  # the child: run as practice.plugin, the module the problems' swaps.py import
    from practice.plugin import main as child

    sys.exit(child(int(sys.argv[1]), sys.argv[2]))
