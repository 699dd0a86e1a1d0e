"""Run the course: every chapter script in order, with the same arguments (e.g. --model synthetic).

运行整个课程：按顺序运行每一章的脚本，参数都相同（例如 --model synthetic）。

Run: python main.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof] [--lang en|zh]
     (bash course.sh does the set-up first)
     python main.py chat [--model ...]        talk to the finished model in the terminal (see --help)
"""
import subprocess
import sys
from pathlib import Path

from qwen import lang
from qwen.course import chapter_parser
from qwen.lang import tr

lang.use(lang.from_command_line(sys.argv[1:]))  # --lang first: every text below, --help's included, speaks it

if sys.argv[1:2] == ["chat"]:
    from app.chat import main

    sys.exit(main(sys.argv[2:]))

# Checked here, once: --help prints this command's help, and a mistyped option stops before the first chapter
chapter_parser(__doc__, every_chapter=True, prog="python main.py",
               epilog=tr("python main.py chat --help: the chat's own options",
                         "python main.py chat --help：聊天程序自己的选项")).parse_args()
chapters = sorted((Path(__file__).resolve().parent / "chapters").glob("ch[0-9][0-9]_*.py"))
for script in chapters:
    print(f"\n{'=' * 30} {script.stem} {'=' * 30}", flush=True)
    code = subprocess.call([sys.executable, str(script), *sys.argv[1:]])
    if code != 0:
        sys.exit(tr(f"{script.name} stopped with exit code {code}; fix what it says above and run again",
                    f"{script.name} 以退出码 {code} 中止；按上面的提示修好后再运行"))
print(tr(f"\nall {len(chapters)} chapters ran. Next: the notebooks (bash course.sh lab) and the exercises "
         f"(python practice/judge.py list)",
         f"\n全部 {len(chapters)} 章都已运行。接下来：打开笔记本（bash course.sh lab），再做练习"
         f"（评测器：python practice/judge.py list）"))
