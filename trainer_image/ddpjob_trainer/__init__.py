"""What runs inside every training Pod: the launcher (`ddpjob-launch`) and the built-in
DDP trainer (`ddpjob-train`). Reads the environment contract in docs/design.md and nothing
else about the cluster."""

# Exit codes the operator's `ExitCode` restart policy understands: 1-127 permanent,
# 128-255 retryable. Bad input can never fix itself on a retry, so it is permanent.
EXIT_BAD_INPUT = 2
# 128 + SIGTERM: "I was asked to stop, saved a checkpoint, run me again".
EXIT_PREEMPTED = 143


class UsageError(Exception):
    """Bad input (flags, env, data, checkpoint): one clear line, exit EXIT_BAD_INPUT."""
