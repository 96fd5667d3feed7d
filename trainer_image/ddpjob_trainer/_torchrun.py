"""`python -m ddpjob_trainer._torchrun ARGS`: torch.distributed.run, with the workers'
exit code kept.

Plain `torchrun` exits 1 whenever a worker fails, which would turn a worker's retryable
143 (saved a checkpoint after SIGTERM) or a kill by the OOM killer into a "permanent"
failure under the operator's ExitCode policy. This wrapper calls torchrun's own `main`
and exits with the first failing worker's code instead (128+N for a signal N).

Asked to stop (SIGTERM), it says nothing of it (the trainer does, in one line) and exits
as soon as its workers have (quick_exit.py).

torchrun keeps its workers' error files in a log directory; given none, it makes
`$TMPDIR/torchelastic_*` and never removes it, one left behind per launch (every
`ddpjob run`, every restart in a Pod). So it is given one of ours, removed when it returns
however it ends, unless the user named one (`--log-dir`, or torchrun's PET_LOG_DIR).
torchrun makes it before its rendezvous but takes over SIGTERM only once its workers
start, so a launch stopped while it waits for its peers (or SIGKILLed) cannot remove it:
the name holds the launch's PID, and each launch removes those of launches no longer
alive (a Python handler could not run while torch waits in its store, and would delay
the stop for as long).

When a worker fails, why (its own exception, with its rank) is left as the container's
termination message and said last (root_cause.py): the workers' stderr passes through
this process for that.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import sys
import tempfile

from ddpjob import exit_codes
from ddpjob_trainer import EXIT_RENDEZVOUS_TIMEOUT, root_cause


class QuietStop(logging.Filter):
    """torchrun logs a worker that stopped when asked (SIGTERM: it saved its state and exited
    143, as ddpjob-train does at each resize torchrun makes, and when its Pod is deleted) as
    `E... failed (exitcode: 143) local_rank: 0`, an error line for a planned stop. That
    record becomes an INFO line that says what happened; any other exit stays an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        if str(record.msg).startswith("failed (exitcode: %s)") and len(args) >= 3 and args[0] in (143, -15):
            record.msg = "worker local_rank %s (pid %s) stopped when asked (exit 143: it saved its state)"
            record.args = (args[1], args[2])
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def _code(exitcode: int) -> int:
    return exit_codes.of_returncode(exitcode) or 1


# What torchrun logs as warnings when it was asked to stop (SIGTERM from the kubelet or
# `ddpjob run`, a gang restart, Ctrl-C): the stop is expected, and the trainer says it in
# one line ("stop requested (signal 15): ..."). A worker it had to SIGKILL is still said.
QUIET_ON_STOP = {
    "torch.distributed.elastic.agent.server.api": ("Received %s death signal, shutting down workers",),
    "torch.distributed.elastic.multiprocessing.api": ("Sending process %s closing signal %s",),
}


class _Quiet(logging.Filter):
    def __init__(self, messages: tuple[str, ...]):
        super().__init__()
        self.messages = messages

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg not in self.messages


def quiet_stop() -> None:
    for name, messages in QUIET_ON_STOP.items():
        logging.getLogger(name).addFilter(_Quiet(messages))


LOG_DIR_PREFIX = "ddpjob-torchrun-"


def _own_log_dir(args: list[str]) -> str | None:
    named = "PET_LOG_DIR" in os.environ or any(
        a in ("--log-dir", "--log_dir") or a.startswith(("--log-dir=", "--log_dir=")) for a in args
    )
    if named:
        return None
    _remove_orphans(tempfile.gettempdir())
    return tempfile.mkdtemp(prefix=f"{LOG_DIR_PREFIX}{os.getpid()}-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _remove_orphans(tmp: str) -> None:
    """Removes the log directories of this user's launches that ended without removing theirs."""
    for path in glob.glob(os.path.join(glob.escape(tmp), f"{LOG_DIR_PREFIX}*-*")):
        pid = os.path.basename(path)[len(LOG_DIR_PREFIX) :].split("-", 1)[0]
        try:
            mine = os.lstat(path).st_uid == os.getuid()
        except OSError:
            continue
        if pid.isdigit() and mine and os.path.isdir(path) and not os.path.islink(path) and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    log_dir = _own_log_dir(args)
    try:
        return _run(args if log_dir is None else ["--log-dir", log_dir, *args], log_dir)
    finally:
        if log_dir is not None:
            shutil.rmtree(log_dir, ignore_errors=True)


def _run(args: list[str], log_dir: str | None) -> int:
    from torch.distributed import DistNetworkError, DistStoreError
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous.api import RendezvousError
    from torch.distributed.run import main as torchrun_main

    quiet_stop()
    logging.getLogger("torch.distributed.elastic.multiprocessing.api").addFilter(QuietStop())
    tap = root_cause.StderrTap.start()
    try:
        torchrun_main(args)
    except ChildFailedError as e:
        _, failure = e.get_first_failure()
        root_cause.report(e.failures, tap)
        return _code(failure.exitcode)
    except (RendezvousError, DistNetworkError, DistStoreError) as e:
        # The static rendezvous (the TCPStore on node 0) did not see every node in time,
        # or node 0's store was not reachable: peers not scheduled yet. Retryable.
        print(
            f"ddpjob-launch: error: rendezvous failed before the gang was complete: {e}".splitlines()[0],
            file=sys.stderr,
            flush=True,
        )
        return EXIT_RENDEZVOUS_TIMEOUT
    except SignalException as e:
        # torchrun already forwarded the signal to the workers and waited for them:
        # nothing is left to do, and finalizing torch would only delay the stop.
        from ddpjob_trainer.quick_exit import exit_now

        if log_dir is not None:  # exit_now skips main's `finally`
            shutil.rmtree(log_dir, ignore_errors=True)
        exit_now(exit_codes.of_signal(e.sigval))  # its exit handlers close the tap
    finally:
        if tap is not None:
            tap.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
