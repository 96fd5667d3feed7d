"""Whether a failure may restart the gang, and how long to wait first."""

from __future__ import annotations

from ddpjob import backoff, error_lines, exit_codes

BACKOFF_CAP_SECONDS = 300  # same ceiling as the kubelet's CrashLoopBackOff


def is_retryable(policy: str, exit_code: int | None, reason: str | None = None, error_line: str | None = None) -> bool:
    """OnFailure: always. Never: never. ExitCode: 1-127 are the program's own verdict
    (bad input, a bug) and permanent; 128-255 are signals (OOM kill, preemption,
    SIGTERM) and no exit code at all means eviction or deletion: both retryable; so is an
    exit whose error line blames the network or a peer (`error_lines.transient`: a rank
    whose peer's node died fails with "Connection closed by peer", which is no verdict of
    the program's on its input). Under every policy, what no attempt can change is
    permanent (`exit_codes.never_retried`: a container whose command could not start,
    argparse's exit 2); a StartError of the node's runtime itself is left to the policy
    (an exit code 128: retried by OnFailure and ExitCode)."""
    if exit_codes.never_retried(exit_code, reason, error_line):
        return False
    if policy == "OnFailure":
        return True
    if policy == "Never":
        return False
    if error_line and error_lines.transient(error_line):
        return True
    return exit_code is None or exit_code == 0 or exit_codes.is_signal(exit_code) or exit_code < 0


def backoff_seconds(base: int, restarts: int) -> float:
    """Delay before starting attempt `restarts` (1 = the first restart): base, 2*base, ...
    No jitter: one job's gang restarts are not a crowd, and the status shows the time."""
    if restarts <= 0 or base <= 0:
        return 0.0
    return float(backoff.Backoff(base, BACKOFF_CAP_SECONDS, jitter=0.0).delay(restarts))
