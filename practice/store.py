"""What the judge writes: the learner's progress (a JSON file, locked while it changes, replaced atomically, never
lost), the working files' folder, and the scratch folders a grading uses (removed even after a kill -9)."""
import json
import os
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from practice import messages as say
from practice.messages import speaking
from practice.problems import HERE
from practice.report import shown_path
from qwen.lang import tr

# ---------------------------------------------------------------- progress: a JSON file, locked, replaced atomically

def home():
    """Where progress and working files live: practice/ itself in a checkout of the course (git-ignored there), or
    ~/.qwen-by-hand after a non-editable install (site-packages is no place for them)."""
    return HERE if (HERE.parent / "pyproject.toml").is_file() else Path.home() / ".qwen-by-hand"


def progress_path():
    if os.environ.get("PRACTICE_PROGRESS"):
        return Path(os.environ["PRACTICE_PROGRESS"])
    return HERE / ".progress.json" if home() == HERE else home() / "progress.json"


def work_dir():
    return Path(os.environ.get("PRACTICE_WORK") or home() / "work")


def load_progress(lang=None):
    """{number: record}. A missing file is empty progress; so is an unreadable one, with a warning (never a crash) in
    `lang` (None: the language already chosen)."""
    with speaking(lang):
        return _load_progress(progress_path())


def _load_progress(path):
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("problems"), dict):
            raise ValueError(tr("not a progress record", "不是进度记录"))
        return {str(k): v for k, v in data["problems"].items() if isinstance(v, dict)}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, UnicodeDecodeError) as e:
        why = (str(e).splitlines() or [type(e).__name__])[0][:80]
        print(say.bad_progress(shown_path(path), why), file=sys.stderr)
        return {}


def save_progress(records, lang=None):
    """Write a temporary file, flush it to disk, then os.replace it over the old one: a judge killed at any moment
    leaves the old file or the new one, never a mix. The temporary file lives in a git-ignored folder."""
    path = progress_path()
    text = json.dumps({"version": 1, "problems": records}, indent=1, ensure_ascii=False, sort_keys=True)
    folder = path.parent if "PRACTICE_PROGRESS" in os.environ else work_dir()
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".progress-", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        with speaking(lang):
            print(say.save_failed(shown_path(path), e), file=sys.stderr)
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


class _Locked:
    """An exclusive lock on PROGRESS.lock while progress is read, changed and replaced, so two judges finishing
    at once both keep their record. fcntl on Linux and macOS, msvcrt on Windows; none if neither works."""

    def __enter__(self):
        path = progress_path()
        self.f = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.f = open(path.with_name(path.name + ".lock"), "a+b")
            try:
                import fcntl
                fcntl.flock(self.f, fcntl.LOCK_EX)
            except ImportError:
                import msvcrt
                self.f.seek(0)
                msvcrt.locking(self.f.fileno(), msvcrt.LK_LOCK, 1)  # retries for 10 s, then raises
        except (OSError, ImportError):
            pass  # no lock: still correct for a single judge
        return self

    def __exit__(self, *exc):
        if self.f is not None:
            self.f.close()  # releases the lock


def record(report, lang=None):
    with _Locked():
        records = load_progress(lang)
        key = str(report.problem.number)
        records[key] = {"accepted": bool(records.get(key, {}).get("accepted")) or report.verdict == "AC",
                        "last": report.verdict, "passed": report.passed, "total": len(report.results),
                        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "file": str(report.file)}
        save_progress(records, lang)


# ---------------------------------------------------------------- temporary folders: removed even after a kill -9

TEMP_PREFIX = "qwen-practice-"


def temp_dir():
    """A temporary folder named after this process, so the next judge can tell when its owner is gone."""
    return tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{os.getpid()}-", ignore_cleanup_errors=True)


def clean_stale_temp():
    """Remove the temporary folders of judges that were killed (their process no longer exists)."""
    for folder in Path(tempfile.gettempdir()).glob(TEMP_PREFIX + "*-*"):
        try:
            pid = int(folder.name[len(TEMP_PREFIX):].split("-")[0])
        except ValueError:
            continue
        try:
            os.kill(pid, 0)
            continue  # alive (or another user's): not ours to remove
        except ProcessLookupError:
            pass
        except OSError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
