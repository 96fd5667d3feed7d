"""A user's DDP script with a deterministic bug: one rank raises at a given step while its
peers wait for it in a collective (their tracebacks follow, the broken connection it left).

DDPJOB_TEST_FAIL_RANK, DDPJOB_TEST_FAIL_STEP: who raises, and when.
DDPJOB_TEST_RECORD=1: the entry point is decorated with torch.distributed.elastic's
`record`, which writes the exception to the rank's error file (TORCHELASTIC_ERROR_FILE).
DDPJOB_TEST_QUIET=1: the failing rank's stderr goes nowhere first (its traceback is not
in the log; only the error file says it).
DDPJOB_TEST_CRASH=1: the failing rank crashes in native code instead (a segfault: it
raises nothing, and dies of SIGSEGV).
"""

import ctypes
import os

import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


def read_freed_memory() -> None:
    ctypes.string_at(0)  # what a bug in an extension does: address 0, SIGSEGV


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    fail_rank, fail_step = int(os.environ["DDPJOB_TEST_FAIL_RANK"]), int(os.environ["DDPJOB_TEST_FAIL_STEP"])
    for step in range(fail_step + 2):
        if step == fail_step and rank == fail_rank:
            if os.environ.get("DDPJOB_TEST_QUIET") == "1":
                os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
            if os.environ.get("DDPJOB_TEST_CRASH") == "1":
                read_freed_memory()
            raise RuntimeError(f"boom at step {step} on rank {rank}")
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    (record(main) if os.environ.get("DDPJOB_TEST_RECORD") == "1" else main)()
