"""Runs a learner's functions on the judge's inputs and reports what happened, one event per line.

Started by judge.py as a separate process (python practice/runner.py INPUTS OUTDIR FILE FUNCTIONS): it loads the
learner's file, calls each case's function, saves each result to OUTDIR/<i>.pt and reports events as JSON lines on
a private copy of stdout (the learner's own prints go to stderr, which the judge caps). It never grades: the judge
compares the saved results in its own process, out of reach of the learner's bugs (no local judge can stop
deliberate cheating). check() in notebook.py uses `run` in-process for notebooks.
"""
import copy
import json
import linecache
import os
import sys
import threading
import time
import traceback
import types

import torch

try:
    from practice.guard import Watch
    from practice.limits import MAX_ITEMS, MAX_TENSOR_BYTES
except ImportError:  # started as python practice/runner.py without the repository on the path: practice/ is first
    from guard import Watch
    from limits import MAX_ITEMS, MAX_TENSOR_BYTES
try:
    from qwen.lang import tr  # the language from QWEN_LANG, which the judge sets for this process (child.py)
except ImportError:  # the course's qwen package not on the path either: its lines in English
    def tr(en, zh):
        return en

TRACEBACK_LINES = 40  # of the learner's frames, after repeated ones are collapsed
CLOCK = time.perf_counter  # taken before the learner's file is imported: replacing time.perf_counter cannot fool it


def bits(t):
    return t.detach().cpu().reshape(-1).contiguous().view(torch.uint8)  # bitwise, so a NaN equals the same NaN


def mutated(before, after):
    """True if `after` differs from `before` (catches functions that change their inputs in place)."""
    if isinstance(before, torch.Tensor):
        return not (isinstance(after, torch.Tensor) and after.dtype == before.dtype
                    and after.shape == before.shape and torch.equal(bits(after), bits(before)))
    if isinstance(before, dict):
        return not isinstance(after, dict) or before.keys() != after.keys() or any(
            mutated(before[k], after[k]) for k in before)
    if isinstance(before, (list, tuple)):
        return not isinstance(after, (list, tuple)) or len(before) != len(after) or any(
            mutated(b, a) for b, a in zip(before, after))
    return before != after


def _unsupported(obj, why=None):
    try:
        text = repr(obj)[:200]
    except BaseException:
        text = "?"
    kind = type(obj).__module__ + "." + type(obj).__qualname__
    kind = kind.replace("builtins.", "")
    return {"__unsupported__": why or kind, "repr": text}


def sanitize(obj, depth=0):
    """The learner's result as plain data that torch.load(weights_only=True) can read back safely."""
    if depth > 20:
        return _unsupported(obj, tr("structure nested too deep", "嵌套太深的结构"))
    if isinstance(obj, torch.Tensor):
        # a subclass (nn.Parameter, ...) is compared as the plain tensor it holds; one on a GPU is copied to the CPU
        try:
            t = obj.detach()
            if type(t) is not torch.Tensor:
                t = t.as_subclass(torch.Tensor)
            if t.is_nested or t.layout != torch.strided:
                layout = "nested" if t.is_nested else str(t.layout).replace("torch.", "")
                return _unsupported(obj, tr(f"{layout} tensor", f"{layout} 张量"))
            if t.is_quantized:
                return _unsupported(obj, tr("quantized tensor", "量化张量"))
            if t.device.type == "meta":
                return _unsupported(obj, tr("tensor on the meta device (it has a shape but no values)",
                                            "meta 设备上的张量（只有形状，没有数值）"))
            if t.numel() * t.element_size() > MAX_TENSOR_BYTES:
                size, cap = f"{t.numel() * t.element_size() / 2 ** 20:.0f}", MAX_TENSOR_BYTES // 2 ** 20
                return _unsupported(obj, tr(f"tensor too large to send back ({size} MiB, over {cap} MiB)",
                                            f"张量太大，无法传回（{size} MiB，超过 {cap} MiB）"))
            return t.to("cpu").resolve_conj().resolve_neg().clone()
        except BaseException:
            return _unsupported(obj, tr("tensor that cannot be copied to the CPU", "无法复制到 CPU 的张量"))
    if obj is None or isinstance(obj, bool):
        return None if obj is None else bool(obj)
    if isinstance(obj, str):
        return str(obj)
    if isinstance(obj, torch.Size):
        return tuple(int(i) for i in obj)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    if type(obj).__module__ == "numpy" and hasattr(obj, "item") and getattr(obj, "ndim", 1) == 0:
        return sanitize(obj.item(), depth + 1)  # numpy scalars
    if isinstance(obj, (list, tuple)):
        if len(obj) > MAX_ITEMS:
            kind, n = type(obj).__name__, len(obj)
            return _unsupported(obj, tr(f"{kind} too long to send back ({n} items, over {MAX_ITEMS})",
                                        f"{kind} 太长，无法传回（{n} 项，超过 {MAX_ITEMS} 项）"))
        items = [sanitize(x, depth + 1) for x in obj]
        return tuple(items) if isinstance(obj, tuple) else items
    if isinstance(obj, dict):
        if len(obj) > MAX_ITEMS or not all(isinstance(k, (str, int)) for k in obj):
            return _unsupported(obj, tr("dict with keys that are not str or int", "键不是 str 或 int 的 dict")
                                if len(obj) <= MAX_ITEMS else None)
        return {(str(k) if isinstance(k, str) else int(k)): sanitize(v, depth + 1) for k, v in obj.items()}
    return _unsupported(obj)


def _own(filename, path):
    if path != "<notebook>":
        return filename == path
    # in a notebook the learner's cells have kernel-made file names: keep what is neither this file nor a library
    return (filename != __file__ and "site-packages" not in filename
            and not filename.startswith((sys.prefix, sys.base_prefix)))


def learner_traceback(exc, path):
    """The traceback cut to the learner's own frames, repeated frames collapsed, capped; then the exception line."""
    path = path if path == "<notebook>" else os.path.abspath(path)
    frames = [(f.f_code.co_filename, line, f.f_code.co_name) for f, line in traceback.walk_tb(exc.__traceback__)
              if _own(f.f_code.co_filename, path)]
    lines = []
    for item in collapse(frames):
        if item[0] == "repeat":
            _, n_lines, times = item
            block = f"{n_lines} line{'s' if n_lines != 1 else ''}"
            more = f"{times} more time{'s' if times != 1 else ''}"
            lines.append(tr(f"  [… the same {block} repeated {more}]", f"  [……同样的 {n_lines} 行又重复了 {times} 次]"))
            continue
        filename, lineno, name = item
        lines.append(f'  File "{os.path.basename(filename)}", line {lineno}, in {name}')
        code = linecache.getline(filename, lineno).strip()
        if code:
            lines.append(f"    {code}")
    if len(lines) > TRACEBACK_LINES:
        head, tail = TRACEBACK_LINES // 4, TRACEBACK_LINES - TRACEBACK_LINES // 4
        cut = len(lines) - head - tail
        lines = lines[:head] + [tr(f"  [… {cut} lines left out]", f"  [……省略了 {cut} 行]")] + lines[-tail:]
    return "\n".join(lines + [exception_line(exc)])


def collapse(frames, longest=8):
    """frames with each run of a block of up to `longest` frames repeated 3 or more times shown once, followed by
    ("repeat", lines in the block, further repetitions). Lines: two per frame with source, one without."""
    out, i = [], 0
    while i < len(frames):
        best = (1, 1)  # (repetitions, block length)
        for size in range(1, longest + 1):
            block, reps = frames[i:i + size], 1
            while frames[i + reps * size:i + (reps + 1) * size] == block and len(block) == size:
                reps += 1
            if reps >= 3 and reps * size > best[0] * best[1]:
                best = (reps, size)
        reps, size = best
        out += frames[i:i + size]
        if reps > 1:
            n_lines = sum(1 + bool(linecache.getline(f, ln).strip()) for f, ln, _ in frames[i:i + size])
            out.append(("repeat", n_lines, reps - 1))
        i += reps * size
    return out


def exception_line(exc):
    try:
        msg = str(exc)
    except BaseException:
        msg = "?"
    if len(msg) > 1500:
        msg = msg[:1500] + " …"
    name = type(exc).__name__
    return f"{name}: {msg}" if msg else name


def load_file(path):
    """Compile and import the learner's file. Returns (module, None) or (None, failure event)."""
    path = os.path.abspath(path)
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as e:
        return None, {"ev": "compile_error", "msg": tr(f"cannot read {path}: {e}", f"无法读取 {path}：{e}")}
    if source.startswith((b"\xff\xfe", b"\xfe\xff")) or source[:200].count(b"\x00") > 1:
        return None, {"ev": "compile_error", "msg": tr("your file is saved as UTF-16 (it has null bytes), which "
                                                      "Python does not read: save it as UTF-8 in your editor",
                                                      "你的文件存成了 UTF-16（里面有空字节），Python 读不了："
                                                      "请在编辑器里把它存成 UTF-8")}
    try:
        code = compile(source, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:
        where = tr(f", line {e.lineno}: ", f"，第 {e.lineno} 行：") if getattr(e, "lineno", None) else tr(", ", "，")
        text = (getattr(e, "text", None) or "").rstrip("\n")
        caret = f"\n    {text}\n    {' ' * max(0, (e.offset or 1) - 1)}^" if text else ""
        return None, {"ev": "compile_error", "msg": f"{type(e).__name__}{where}{getattr(e, 'msg', e)}{caret}"}
    mod = types.ModuleType("learner")
    mod.__file__ = path
    sys.modules["learner"] = mod
    try:
        exec(code, mod.__dict__)
    except ImportError as e:
        return None, {"ev": "compile_error", "msg": learner_traceback(e, path)}
    except BaseException as e:  # SystemExit included: a file that exits while importing
        return None, {"ev": "load_error", "exc": type(e).__name__, "tb": learner_traceback(e, path),
                      "code": repr(e.code)[:200] if isinstance(e, SystemExit) else None}
    return mod, None


def run(functions, calls, emit, store, path, reraise=(), answers=None):
    """Call functions[name](*values) for each (name, values) in `calls`; store(i, result); emit events:
    begin i, ret i (the call returned or raised; t = its time on CLOCK), end i (the result is stored), then done.
    answers(): the answers the learner's code has used so far (guard.Watch); after a case that used one, the run
    stops with an "answer" event in place of what would follow."""
    for i, (name, values) in enumerate(calls):
        before = copy.deepcopy(values)
        emit({"ev": "begin", "i": i})
        t0 = CLOCK()
        try:
            out = functions[name](*values)
            ok = True
        except reraise:
            raise
        except BaseException as e:  # SystemExit, KeyboardInterrupt raised by the learner: all a Runtime Error
            ok, err = False, e
        t = CLOCK() - t0
        emit({"ev": "ret", "i": i, "t": t})
        if ok:
            try:
                store(i, sanitize(out))
                emit({"ev": "end", "i": i, "ok": True, "mutated": bool(mutated(before, values))})
            except Exception as e:
                emit({"ev": "end", "i": i, "ok": False, "exc": "JudgeError",
                      "tb": tr(f"the judge could not read your result back: {exception_line(e)}",
                               f"评测器没能读回你的结果：{exception_line(e)}")})
        else:
            emit({"ev": "end", "i": i, "ok": False, "exc": type(err).__name__,
                  "tb": learner_traceback(err, path),
                  "code": repr(err.code)[:200] if isinstance(err, SystemExit) else None})
        if answers is not None and answers():
            emit({"ev": "answer", "names": list(answers())})
            return
    emit({"ev": "done"})


def _watchdog(parent):
    """If the judge dies (say, kill -9), stop: the learner's code must not run on, unwatched, forever."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(1)


def main(inputs, outdir, path, names, answers=None):
    """answers: {"modules": [...], "files": [...], "root": folder} (see guard.Watch), what the file may not use."""
    threading.Thread(target=_watchdog, args=(os.getppid(),), daemon=True).start()
    torch.set_num_threads(1)  # one thread: a loaded machine's thread pool must not eat a case's time limit
    proto = os.dup(1)  # the judge reads events here; the learner's prints go to stderr (fd 1 now points there)
    os.dup2(2, 1)

    def emit(event):
        data = (json.dumps(event) + "\n").encode()
        while data:
            data = data[os.write(proto, data):]

    calls = torch.load(inputs, weights_only=True)
    sys.path[0] = os.path.dirname(os.path.abspath(path))  # the learner may import helpers next to the file
    def stop(hits):  # the file used the answer: nothing it does next is graded (importing transformers takes long)
        emit({"ev": "answer", "names": list(hits)})
        os._exit(0)

    answers = answers or {}
    watch = Watch(answers.get("modules", []), answers.get("files", []), answers.get("root"), path, on_hit=stop)
    emit({"ev": "ready"})
    before = set(sys.modules)
    with watch:
        mod, failure = load_file(path)
    watch.modules_loaded(before)
    watch.imports(path)
    if failure:
        emit(failure)
        return
    missing = [n for n in names if not callable(getattr(mod, n, None))]
    if missing:
        emit({"ev": "missing", "names": missing})
        return
    watch.uses([getattr(mod, n) for n in names])
    watch.on_hit = None  # from here on, a case that uses the answer ends the run after it (the events' order)
    emit({"ev": "loaded"})

    def store(i, value):
        torch.save(value, os.path.join(outdir, f"{i}.pt"))

    with watch:
        run({n: getattr(mod, n) for n in names}, calls, emit, store, path, answers=lambda: watch.hits)


if __name__ == "__main__":
    status = 0
    try:
        main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]),
             json.loads(sys.argv[5]) if len(sys.argv) > 5 else None)
    except BaseException:  # a failure of the runner itself, or of what the learner's code did to it (closed fds)
        status = 70
        try:
            traceback.print_exc()
        except BaseException:
            pass
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(status)  # skip learner atexit hooks and non-daemon threads: the judge has everything it needs
