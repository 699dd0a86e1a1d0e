"""The files that decide a verdict must be the course's own (practice/pinned.py): in a git checkout the committed
ones, in an install without git the ones the package was built with (practice/checksums.json). Each test works on a
copy of practice/ and qwen/, in a temporary git repository or outside any."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from practice.pinned import INFRASTRUCTURE, pinned_files, problem_folders, stale, write_manifest
from practice.problems import problems, verified

REPO = Path(__file__).resolve().parent.parent
IGNORE = shutil.ignore_patterns("__pycache__", "work", ".progress.json*", "checksums.json")
# the problems whose expected values qwen/norm.py computes, read off their cases.py by hand: 204 (RMSNorm itself),
# 208 and 209 (attention's q/k norms), 210, 211, 212 and 221 (qwen.deltanet imports it), 213 (the model)
NORM_USERS = {204, 208, 209, 210, 211, 212, 213, 221}


def git(top, *args):
    return subprocess.run(["git", "-C", str(top), "-c", "user.name=course", "-c", "user.email=course@example.com",
                           *args], check=True, capture_output=True, text=True).stdout


def copy_course(to):
    for pkg in ("practice", "qwen"):
        shutil.copytree(REPO / pkg, to / pkg, ignore=IGNORE)
    return to


def edit(path, text="\n# an edited comment\n"):
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


def stale_problems(top):
    """{number: [pinned files that are not the course's own]} for every problem of the copy at `top`."""
    found = {int(f.name[:3]): stale(f, top) for f in problem_folders(top / "practice")}
    return {n: bad for n, (bad, _) in found.items() if bad}


@pytest.fixture(scope="module")
def course_repo(tmp_path_factory):
    top = copy_course(tmp_path_factory.mktemp("course"))
    git(top, "init", "-q")
    git(top, "add", ".")
    git(top, "commit", "-q", "-m", "the course")
    return top, git(top, "rev-parse", "HEAD").strip()


@pytest.fixture
def repo(course_repo):
    """The copy in git, as first committed (each test's edits and commits undone)."""
    top, first = course_repo
    git(top, "reset", "-q", "--hard", first)
    git(top, "clean", "-q", "-f", "-d")
    return top


def test_the_pinned_files_are_what_computes_the_expected_values():
    """Each problem pins its own folder but the statements and starter, its given files, and the qwen modules its
    cases import, followed through their imports but not through the course's infrastructure."""
    files = {f.name: pinned_files(f) for f in problem_folders(REPO / "practice")}
    oracle = {name[:3]: {k for k in pinned if k.startswith("qwen/")} for name, pinned in files.items()}
    assert oracle["204"] == {"qwen/norm.py"} and oracle["201"] == set()
    # 208's cases import qwen.attention (which imports qwen.norm and qwen.rope), qwen.config, qwen.rope and
    # qwen.weights (which imports qwen.hub and qwen.lang: infrastructure)
    assert oracle["208"] == {"qwen/attention.py", "qwen/norm.py", "qwen/rope.py", "qwen/config.py", "qwen/weights.py"}
    assert oracle["215"] == {"qwen/chat.py", "qwen/chat_tools.py"}  # the chat format is 215's expected value
    assert oracle["202"] == {"qwen/sizes.py", "qwen/config.py"}  # the synthetic shapes are an input, not a result
    assert {k for pinned in oracle.values() for k in pinned} & set(INFRASTRUCTURE) == set()
    assert {f"practice/{name}/{f}" for name in ("204_rmsnorm",) for f in ("cases.py", "meta.json", "mistakes.toml",
                                                                         "solution.py")} <= set(files["204_rmsnorm"])
    assert not {k for k in files["204_rmsnorm"] if k.endswith(("README.md", "starter.py", "swaps.py"))}
    assert "practice/assembly.py" in files["213_decoder_layer"]  # 213's given parts
    assert "practice/217_mrope_positions/wrong/text_positions.py" in files["217_mrope_positions"]


def test_an_edit_of_the_infrastructure_leaves_every_problem_gradable(repo):
    """A comment in qwen/lang.py, qwen/hub.py or qwen/synthetic.py, not committed: every problem is still graded."""
    for name in ("lang.py", "hub.py", "synthetic.py", "__init__.py"):
        edit(repo / "qwen" / name)
    assert git(repo, "status", "--short").count("\n") == 4
    assert stale_problems(repo) == {}
    assert stale(repo / "practice" / "204_rmsnorm", repo) == ([], "git")


def test_an_uncommitted_edit_of_an_oracle_module_stops_its_problems_until_committed(repo):
    """qwen/norm.py edited: exactly the problems whose expected values it computes refuse, naming it; committed, the
    edit is the course's and they are graded again."""
    edit(repo / "qwen" / "norm.py")
    found = stale_problems(repo)
    assert set(found) == NORM_USERS and all(bad == ["qwen/norm.py"] for bad in found.values()), found
    assert stale(repo / "practice" / "204_rmsnorm", repo) == (["qwen/norm.py"], "git")
    git(repo, "commit", "-q", "-am", "a better comment")
    assert stale_problems(repo) == {}


def test_a_problem_file_not_committed_is_refused_with_the_fix(repo, capsys, monkeypatch):
    """An edited cases.py or given file, a known mistake added and not committed, a deleted mistakes.toml: each is
    named, with the command that restores it, in English and in Chinese."""
    practice = repo / "practice"
    edit(practice / "204_rmsnorm" / "cases.py")
    edit(practice / "assembly.py")
    (practice / "217_mrope_positions" / "wrong" / "new.py").write_text("x = 1\n")
    (practice / "214_sampling" / "mistakes.toml").unlink()
    edit(practice / "206_rope" / "README.md")  # a statement decides no verdict
    edit(practice / "206_rope" / "starter.py")
    assert stale_problems(repo) == {204: ["practice/204_rmsnorm/cases.py"], 213: ["practice/assembly.py"],
                                    214: ["practice/214_sampling/mistakes.toml"],
                                    217: ["practice/217_mrope_positions/wrong/new.py"]}
    prob = problems(practice)[204]
    monkeypatch.chdir(repo)
    assert verified(prob, "en") is False
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and "Problem 204 is not graded" in said, said
    assert "differ from the last commit: practice/204_rmsnorm/cases.py." in said, said
    assert "git checkout -- practice/204_rmsnorm/cases.py" in said and "Commit the change" in said, said
    assert verified(prob, "zh") is False
    said = capsys.readouterr().err
    assert "第 204 题不予评测" in said and "与最近一次提交不一致：practice/204_rmsnorm/cases.py。" in said, said
    assert "git checkout -- practice/204_rmsnorm/cases.py" in said, said
    assert verified(problems(practice)[206], "en") is True


def test_without_git_the_checksums_of_the_build_decide(tmp_path, repo, capsys):
    """A copy outside git, or inside a repository that does not track it (a wheel in a virtual environment in a
    checkout): no checksum file, nothing to compare with; with the one the build writes, an edit of an oracle module
    is refused, one of the infrastructure is not."""
    for top in (copy_course(tmp_path / "site"), copy_course(repo / "venv" / "site")):
        practice = top / "practice"
        assert stale(practice / "204_rmsnorm", top) == ([], None)
        write_manifest(practice, top)
        assert stale(practice / "204_rmsnorm", top) == ([], "build")
        edit(top / "qwen" / "lang.py")
        edit(top / "qwen" / "norm.py")
        (practice / "204_rmsnorm" / "mistakes.toml").unlink()
        assert stale(practice / "204_rmsnorm", top) == (["practice/204_rmsnorm/mistakes.toml", "qwen/norm.py"],
                                                        "build")
        assert stale(practice / "203_embedding", top) == ([], "build")
    edit(practice / "203_embedding" / "cases.py")
    assert verified(problems(practice)[203], "en") is False
    said = capsys.readouterr().err
    assert "differ from the installed course (practice/checksums.json): practice/203_embedding/cases.py." in said


@pytest.mark.slow
def test_the_command_line_refuses_an_edited_oracle_module_in_one_line(repo):
    """judge.py in the copy, which imports the copy's qwen: qwen/rope.py edited and not committed, 206 is refused
    before grading, in one line naming the file and the command that restores it; nothing is recorded."""
    edit(repo / "qwen" / "rope.py", "\n# a learner's edit\n")
    progress = repo.parent / "p.json"
    out = subprocess.run([sys.executable, str(repo / "practice" / "judge.py"), "206", "--file",
                          repo / "practice" / "206_rope" / "solution.py"], cwd=repo, capture_output=True, text=True,
                         env=dict(os.environ, PRACTICE_PROGRESS=str(progress), QWEN_LANG="en"), timeout=120)
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr.count("\n") == 1 and "git checkout -- qwen/rope.py" in out.stderr, out.stderr
    assert not progress.exists()
