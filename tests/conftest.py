"""Shared fixtures: the synthetic checkpoint (generated once into data/), transformers' view of it, and the small
random checkpoints transformers writes. Plain helpers live in helpers.py and hf_checkpoint.py.

The suite runs in two worker processes (`pytest -n 2`, pytest-xdist; course.sh test): each worker uses one thread,
and what is expensive to make (a chapter script's run, a notebook's execution) is made once per test run and shared
by the workers through files in the run's temporary folder (helpers.shared_once, under a lock that works on Linux,
macOS and Windows)."""
import os
import re
from collections import Counter

os.environ["QWEN_LANG"] = "en"  # the suite reads what the course prints in English; tests of the Chinese ask for it

import pytest
import torch

from helpers import ROOT, WORKER, fewer_layers, kernel_under_test, run_chapter, shared_once
from hf_checkpoint import CONFIGS, SMALL, add_mtp, save_checkpoint
from qwen import kernel
from qwen.synthetic import synthetic_path

# Two tiers. The default one (bash course.sh test) proves every qwen/ module against its oracle, the judge's units,
# each problem's solution and starter, the static edition checks and the import guard, in a few minutes. The tests
# marked `slow` run only with --all (bash course.sh test --all, what .ci/run runs): whole chapter scripts and
# notebooks, every known mistake, the judge in its sandbox, the browser, the benches, child processes that import
# torch. A test that reads a chapter's run or a notebook's execution (the fixtures below), or the judge's verdicts on
# the hostile files (tests/test_judge.py, each graded in the sandbox), must be marked slow.
SLOW_FIXTURES = ("chapter_outputs", "executed", "hostile_reports")


def pytest_addoption(parser):
    parser.addoption("--all", action="store_true",
                     help="run every test, the ones marked slow too (the full gate: what .ci/run runs)")


# Which worker runs what. The tests that read one chapter's runs go to one worker together, so it runs that chapter
# while the other worker runs another, and neither waits for a run the other is making; so do the tests that share
# an expensive fixture of their module (the built book and its browser, the hostile files' verdicts, the built
# checkpoints, the plain greedy runs speculative decoding is held to, the bf16 oracles). The chapters come first,
# the book last, when the notebooks it reads have run. The controller schedules by test id alone (it sees no
# fixtures), so a group is named by where its tests are; each worker checks that every test of such a fixture
# falls in its group.
JUDGE = "tests/test_judge.py::test_"
GROUPS = {  # group: (where its tests are: test ids start so, the fixtures they share)
    "book": (("tests/test_web.py::",), ("site", "browser", "served")),
    "hostile": (tuple(JUDGE + name for name in (
        "hostile", "processes_started", "daemons_started", "crash_at_import", "collapsed_and_capped", "memory_limit",
        "a_replaced_clock", "terminal_escapes", "any_return_value", "reports_in_chinese")), ("hostile_reports",)),
    "any_checkpoint": (("tests/test_any_checkpoint.py::",), ("four_pixel",)),
    "speculative": (("tests/test_speculative.py::test_greedy_equals_plain_greedy",), ("plain_runs",)),
    "fast": (("tests/test_fast.py::",), ("bf16_oracles",)),
}
CHAPTERS = {p.stem[2:4]: p.stem for p in (ROOT / "chapters").glob("ch[0-9][0-9]_*.py")}  # "08" -> "ch08_model"
READS_A_CHAPTER = ("tests/test_notebooks.py::", "tests/test_editions.py::", "tests/test_chapters.py::",
                   "tests/test_book_ch", "tests/test_ch08.py::")


def group_of(nodeid):
    """The group of the test `nodeid` (None: a group of its own)."""
    for group, (where, _) in GROUPS.items():
        if nodeid.startswith(where):
            return group
    named = re.search(r"ch(\d\d)", nodeid)  # test_book_ch12.py, [ch04_rope-zh], [ch11_mtp.py]: the chapter
    if named and nodeid.startswith(READS_A_CHAPTER):
        return CHAPTERS.get(named.group(1))
    return None


def order_of(item):
    group = group_of(item.nodeid)
    return {None: 2, "book": 3}.get(group, 0 if group and group.startswith("ch") else 1)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent when the suite runs without it
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        """Each group to one worker, whole; every other test on its own; in the order collected (below)."""
        def _split_scope(self, nodeid):
            return group_of(nodeid) or nodeid

    config.option.loadscopereorder = False  # keep the order of the collection: chapters first, the book last
    return ByGroup(config, log)


def pytest_collection_modifyitems(config, items):
    unmarked = [i.nodeid for i in items if set(SLOW_FIXTURES) & set(getattr(i, "fixturenames", ()))
                and not i.get_closest_marker("slow")]
    if unmarked:
        raise pytest.UsageError(f"{len(unmarked)} tests use {' or '.join(SLOW_FIXTURES)} but are not marked slow "
                                f"(@pytest.mark.slow): {', '.join(unmarked)}")
    for item in items:
        fixtures, placed = set(getattr(item, "fixturenames", ())), group_of(item.nodeid)
        for group, (_, shared) in GROUPS.items():
            if fixtures & set(shared) and placed != group:
                raise pytest.UsageError(f"{item.nodeid} uses {', '.join(fixtures & set(shared))}: add it to group "
                                        f"{group!r} in tests/conftest.py GROUPS")
        if fixtures & {"executed", "chapter_outputs"} and not placed:
            raise pytest.UsageError(f"{item.nodeid} reads a chapter's run: name the chapter (chNN) in the test's id, "
                                    "so that it runs on the worker that runs that chapter (tests/conftest.py)")
    items.sort(key=order_of)  # stable: within a rank, the files' own order
    if config.getoption("--all") or config.getoption("markexpr"):  # -m chooses for itself
        return
    slow = [i for i in items if i.get_closest_marker("slow")]
    items[:] = [i for i in items if not i.get_closest_marker("slow")]
    config.hook.pytest_deselected(items=slow)
    left = Counter(i.nodeid.split("::")[0] for i in slow)
    if hasattr(config, "workeroutput"):  # an xdist worker: the controller prints what this tier left out
        config.workeroutput["slow_left"] = dict(left)
    else:
        config.stash[SLOW_LEFT] = left


SLOW_LEFT = pytest.StashKey()


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent when the suite runs without it
def pytest_testnodedown(node, error):
    """Under pytest -n the workers collect: the controller takes what they left out (the same in each)."""
    node.config.stash[SLOW_LEFT] = Counter(getattr(node, "workeroutput", {}).get("slow_left", {}))


def pytest_terminal_summary(terminalreporter, config):
    left = config.stash.get(SLOW_LEFT, None)
    if left:
        files = ", ".join(f"{f.removeprefix('tests/')} {n}" for f, n in left.most_common())
        terminalreporter.write_line(f"not run in this tier, marked slow: {sum(left.values())} tests ({files}); "
                                    "bash course.sh test --all runs them", yellow=True)


def pytest_configure(config):
    if WORKER:  # the workers share the cores: one thread each, in this process and in the scripts it starts
        torch.set_num_threads(1)
        os.environ["OMP_NUM_THREADS"] = "1"
    else:
        synthetic_path()  # generated once, before any worker starts (two workers must not write it at once)


@pytest.fixture(scope="session", autouse=True)
def learner_files_untouched(tmp_path_factory):
    """The judge's progress and working files go to a temporary folder for the whole run, in this process and in
    every child it starts: a test that grades a solution must not mark it solved in the learner's own progress."""
    folder = tmp_path_factory.mktemp("practice")
    saved = {k: os.environ.get(k) for k in ("PRACTICE_PROGRESS", "PRACTICE_WORK")}
    os.environ.update(PRACTICE_PROGRESS=str(folder / "progress.json"), PRACTICE_WORK=str(folder / "work"))
    yield folder
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def synthetic():
    return synthetic_path()


@pytest.fixture(scope="session")
def shallow(synthetic, tmp_path_factory):
    """The synthetic checkpoint cut to its first 4 layers, one block of its pattern (3 DeltaNet layers, then full
    attention); the widths, vocabulary, head, MTP block, tower and tokenizer unchanged (helpers.fewer_layers): for
    the claims that hold at any depth, at a sixth of the cost, and for the chapters run at another depth."""
    return fewer_layers(synthetic, tmp_path_factory.mktemp("shallow") / "layers4", 4)


@pytest.fixture(scope="session")
def chapter_outputs(synthetic, tmp_path_factory):
    """Each chapter script run once, in English, on the synthetic checkpoint, as a learner runs it, shared by the
    workers: script -> (exit code, stdout, stderr). What the Chinese edition prints is read from its notebook's run
    (`executed`: the same cells), and tests/test_chapters.py runs every script in Chinese on a shallower checkpoint,
    so no chapter runs twice in one language and configuration."""
    def output(script):
        return tuple(shared_once(tmp_path_factory, f"chapter-{script}",
                                 lambda: run_chapter(script, "--model", "synthetic", "--lang", "en")))
    return output


@pytest.fixture(scope="session")
def executed(synthetic, tmp_path_factory):
    """Each chapter's notebook (English, or Chinese from notebooks/zh/) run once per test run in a kernel of this
    Python on the synthetic checkpoint, as the book runs it (web/execute.py), shared by the notebook and book tests
    and by the workers: (name, lang) -> (notebook with its outputs, the error that stopped it or None). No timing: a
    hang is stopped by the per-cell timeout."""
    import nbformat  # here, not at the top: it costs seconds to import, and most runs execute no notebook

    from web.execute import execute, kernel_spec

    kernels = {}

    def run(name, lang="en"):
        def make():
            if lang not in kernels:
                kernels[lang] = kernel_spec(tmp_path_factory.mktemp(f"kernels-{lang}"), synthetic, lang)
            folder = ROOT / "notebooks" / ("" if lang == "en" else lang)
            nb, error = execute(folder / f"{name}.ipynb", kernels[lang])
            return nbformat.writes(nb), error
        key = f"notebook-{name}" if lang == "en" else f"notebook-{lang}-{name}"
        text, error = shared_once(tmp_path_factory, key, make)
        return nbformat.reads(text, as_version=4), error
    return run


@pytest.fixture(scope="session")
def tok(synthetic):
    """The synthetic checkpoint's tokenizer (the real vocabulary), loaded once: its tokenizer.json takes a second."""
    from qwen.tokenizer import load_tokenizer

    return load_tokenizer(synthetic)


@pytest.fixture(scope="session")
def hf_model(synthetic):
    """transformers' Qwen3.5 text model on the same checkpoint, in fp32: the oracle."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(synthetic, dtype=torch.float32)
    return model.eval()


@pytest.fixture(scope="module")
def under_test():
    """qwen.kernel's module for one test file's tests: its own build, or a planted copy's (KERNEL_UNDER_TEST,
    helpers.kernel_under_test), so that the qwen functions the tests call run the copy."""
    module, before = kernel_under_test(), dict(kernel._built)
    kernel._built.update(module=module)
    yield module
    kernel._built.clear()
    kernel._built.update(before)


@pytest.fixture(scope="module")
def one_thread():
    """Tiny matrices on a shared CPU: one thread is faster than several fighting. Use with
    `pytestmark = pytest.mark.usefixtures("one_thread")`; the count is restored after the module."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """{name: folder} of small random checkpoints written by transformers, one per hf_checkpoint.CONFIGS entry."""
    out = {}
    for i, (name, (text, tied, drop)) in enumerate(CONFIGS.items()):
        out[name] = save_checkpoint(tmp_path_factory.mktemp(f"cfg{i}"), text, tied=tied, seed=i,
                                    drop_layer_types=drop)
    return out


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """{name: folder} of small random checkpoints with random mtp.* tensors added, one per hf_checkpoint.SMALL entry."""
    return {name: add_mtp(save_checkpoint(tmp_path_factory.mktemp(f"mtp{i}"), text, tied=tied, seed=i), 10 + i)
            for i, (name, (text, tied)) in enumerate(SMALL.items())}
