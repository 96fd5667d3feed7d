"""Following a DDPJob's phase to an end, as `ddpjob wait` and `submit --wait` say it.

They poll the job (cluster/jobs.py reads it) until its phase is the one asked for, it
ends otherwise or time runs out; the exit status says which (0, 1, `WAIT_TIMED_OUT`).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from ddpjob import text
from ddpjob.cluster.connection import Connection
from ddpjob.cluster.jobs import TERMINAL, get_job, phase_of

WAIT_TIMED_OUT = 2
# `submit --wait` on a job the operator has not written a status to after this long says so
# once (an operator that is not running leaves a job without one for ever).
NO_STATUS_SAY_AFTER = 10.0


def follow(conn: Connection, name: str, wanted: tuple[str, ...], timeout: float | None, report: bool) -> int:
    """Poll the job until its phase is in `wanted` (0), it ends elsewhere (1) or time runs out (2).
    With `report`, print each phase change; `Succeeded` is then the goal."""
    deadline = None if timeout is None else time.monotonic() + timeout
    started = time.monotonic()
    last, delay, said_no_status = None, 0.2, False
    while True:
        job = get_job(conn, name)
        status = job.get("status") or {}
        phase = phase_of(job)
        if report:
            if not status.get("phase"):
                # Not seen by the operator yet: its first status says what Pending means.
                if not said_no_status and time.monotonic() - started >= NO_STATUS_SAY_AFTER:
                    print(
                        f"{name}: no status after {NO_STATUS_SAY_AFTER:.0f}s: is the ddpjob operator running "
                        "on this cluster?",
                        flush=True,
                    )
                    said_no_status = True
            elif (phase, status.get("restarts") or 0) != last:
                restarts = status.get("restarts") or 0
                print(
                    f"{name}: {phase}"
                    + (f" (restarts {restarts})" if restarts else "")
                    + (f": {text.clean(status['message'], 500)}" if status.get("message") else ""),
                    flush=True,
                )
                last = (phase, restarts)
        if phase in wanted:
            if not report:  # the same line as when it ends otherwise, on stdout
                print(said(name, status), flush=True)
            return 1 if report and phase == "Failed" else 0
        if phase in TERMINAL:
            if not report:  # `ddpjob wait` always says what happened
                print(said(name, status), file=sys.stderr, flush=True)
            return 1
        if deadline is not None and time.monotonic() >= deadline:
            print(f"error: timed out waiting for {name} (phase {phase})", file=sys.stderr)
            return WAIT_TIMED_OUT
        time.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))
        delay = min(delay * 1.5, 2.0)  # polls back off to one every 2 s


def said(name: str, status: dict[str, Any]) -> str:
    """What `ddpjob wait` prints of the phase it found, reached or not: `J Failed: Error:
    <message>`, `J Succeeded: <message>`, `J Running: <message>`; a failure's reason is
    said, a phase is never said twice."""
    phase = status.get("phase")
    reason = (status.get("lastFailure") or {}).get("reason") if phase == "Failed" else None
    why = ": ".join(text.clean(x, 500) for x in (reason, status.get("message")) if x)
    return f"{name} {phase}: {why}" if why else f"{name} {phase}"
