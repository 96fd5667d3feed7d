"""Why a node's workers failed (ddpjob_trainer.root_cause): their stderr passes through
the launcher unchanged while it is read for tracebacks, and the first rank's exception
(or the earliest error file torch's `record` wrote) is left as the termination message."""

import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

from ddpjob_trainer import root_cause

# Two "workers" (children that inherit stderr, as torchrun's do): rank 1 raises first,
# rank 0 follows with the connection it broke; a progress bar's carriage returns and a
# last line with no end pass as they are.
TAPPED = textwrap.dedent("""
    import os, subprocess, sys, time
    from ddpjob_trainer.root_cause import StderrTap
    tap = StderrTap()
    worker = "import os, sys; os.write(2, sys.argv[1].encode())"
    first = ("[rank1]: Traceback (most recent call last):\\n[rank1]:   File \\"t.py\\", line 1\\n"
             "[rank1]: ValueError: bad shard 3\\n")
    then = "10%|#  |\\r20%|## |\\r[rank0]: Traceback (most recent call last):\\n[rank0]:   File \\"t.py\\"\\n" \\
           "[rank0]: RuntimeError: Connection closed by peer [10.0.0.1]:4319\\nno end"
    subprocess.run([sys.executable, "-c", worker, first], check=True)
    subprocess.run([sys.executable, "-c", worker, then], check=True)
    tap.close()
    print(repr(tap.reader.exception()))
""")


def test_the_workers_stderr_passes_unchanged_and_the_first_rank_to_raise_is_kept():
    done = subprocess.run([sys.executable, "-c", TAPPED], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        b'[rank1]: Traceback (most recent call last):\n[rank1]:   File "t.py", line 1\n'
        b"[rank1]: ValueError: bad shard 3\n10%|#  |\r20%|## |\r[rank0]: Traceback (most recent "
        b'call last):\n[rank0]:   File "t.py"\n[rank0]: RuntimeError: Connection closed by peer '
        b"[10.0.0.1]:4319\nno end"
    )
    assert done.stdout.decode().strip() == "(1, 'ValueError: bad shard 3')"


def failure(tmp_path, rank, message, written_ns, timestamp):
    path = tmp_path / f"error-{rank}.json"
    path.write_text(json.dumps({"message": message}))
    os.utime(path, ns=(written_ns, written_ns))
    return SimpleNamespace(message=message, error_file=str(path), timestamp=timestamp)


def test_the_earliest_error_file_is_the_cause_and_becomes_the_termination_message(tmp_path, monkeypatch, capsys):
    log = tmp_path / "termination-log"
    monkeypatch.setenv("DDPJOB_TERMINATION_LOG", str(log))
    base = 1_780_000_000 * 10**9
    # torchrun's timestamps are whole seconds (equal here); the files say who wrote first.
    failures = {
        0: failure(tmp_path, 0, {"message": "RuntimeError: Connection closed by peer", "extraInfo": {}}, base + 5, 7),
        3: failure(tmp_path, 3, {"message": "ValueError: bad shard 3\nsecond line", "extraInfo": {}}, base + 1, 7),
        # A worker without an error file (torch's ProcessFailure says "<N/A>" and a hint).
        1: SimpleNamespace(
            message="To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
            error_file="<N/A>",
            timestamp=7,
        ),
    }
    assert root_cause.report(failures, None) == "[rank3]: ValueError: bad shard 3"  # nowhere to leave it: said
    assert not log.exists()  # nothing made where no kubelet made the file
    assert capsys.readouterr().err == "ddpjob-launch: first to fail: [rank3]: ValueError: bad shard 3\n"
    log.write_text("")
    assert root_cause.report(failures, None) == "[rank3]: ValueError: bad shard 3"
    assert log.read_text() == "[rank3]: ValueError: bad shard 3"
    # Neither an error file nor a traceback: nothing is claimed, the log's tail says it.
    log.write_text("")
    assert root_cause.report({1: failures[1]}, None) is None and log.read_text() == ""


def test_a_closed_stderr_gets_no_tap_and_the_launch_goes_on():
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os; os.close(2); from ddpjob_trainer.root_cause import StderrTap; print(StderrTap.start())",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (0, "None\n"), done
