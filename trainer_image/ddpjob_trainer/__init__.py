"""What runs inside every training Pod: the launcher (`ddpjob-launch`) and the built-in
DDP trainer (`ddpjob-train`). Reads the environment contract in docs/design.md and nothing
else about the cluster."""

from ddpjob import exit_codes

# Exit codes the operator's `ExitCode` restart policy understands (ddpjob.exit_codes):
# 1-127 permanent, 128-255 retryable. Bad input can never fix itself on a retry.
EXIT_BAD_INPUT = exit_codes.BAD_INPUT
# 128 + SIGTERM: "I was asked to stop, saved a checkpoint, run me again".
EXIT_PREEMPTED = exit_codes.PREEMPTED
# 128 + SIGALRM: the gang did not come together in time (MASTER_ADDR never resolved, or
# the rendezvous store timed out waiting for peers): retryable, like a preemption.
EXIT_RENDEZVOUS_TIMEOUT = exit_codes.RENDEZVOUS_TIMEOUT


class RendezvousTimeout(Exception):
    """The gang was not complete in time: exit EXIT_RENDEZVOUS_TIMEOUT."""


class UsageError(Exception):
    """Bad input (flags, env, data, checkpoint): one clear line, exit EXIT_BAD_INPUT."""
