"""The stop path's exit (quick_exit.py): the exit code, atexit's handlers and whatever
the standard streams hold are kept; the interpreter's finalization of every module (the
seconds a torch process spends unloading) is skipped."""

from __future__ import annotations

import subprocess
import sys

# What the interpreter's shutdown does that atexit does not: it ends the main thread and
# waits for every non-daemon thread (documented, unlike a module global's __del__ at exit,
# which one GPU machine's Python did not call). The thread writes once the main thread has
# ended, so only a shutdown that went through the interpreter leaves its file.
PROGRAM = """
import atexit, pathlib, sys, threading
from ddpjob_trainer.quick_exit import exit_now
out = pathlib.Path(sys.argv[1])
atexit.register(lambda: (out / "atexit").write_text("ran"))
def after_main():
    threading.main_thread().join()
    (out / "finalized").write_text("ran")
threading.Thread(target=after_main).start()
print("said before the exit", end="")  # block-buffered on a pipe: only a flush gets it out
if sys.argv[2] == "quick":
    exit_now(143)
sys.exit(143)
"""


def run(tmp_path, how: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, str(tmp_path), how], capture_output=True, text=True, timeout=60
    )


def test_exit_now_keeps_the_code_the_handlers_and_the_output_and_skips_finalization(tmp_path):
    done = run(tmp_path, "quick")
    assert (done.returncode, done.stdout, done.stderr) == (143, "said before the exit", "")
    assert (tmp_path / "atexit").read_text() == "ran"
    assert not (tmp_path / "finalized").exists()


def test_a_plain_exit_finalizes_which_is_what_the_stop_path_skips(tmp_path):
    done = run(tmp_path, "plain")  # the control: the same program, sys.exit
    assert (done.returncode, done.stdout) == (143, "said before the exit")
    assert (tmp_path / "atexit").exists() and (tmp_path / "finalized").exists()
