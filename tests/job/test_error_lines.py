"""The line that says why a container failed (ddpjob.error_lines): the first rank's own
exception, found through torch's `[rankN]: ` prefixes, and "the same failure" told
apart from times, pids and addresses."""

from __future__ import annotations

from ddpjob.error_lines import Reader, error_line, same_failure_key, transient
from ddpjob.exit_codes import never_retried

# A node of 2 processes whose rank 0 raised (torch 2.x, gloo): its peer follows with a
# broken connection, then torchrun says which local rank failed, with a time and pids.
CRASH = """\
ddpjob-launch: node 0/1, 2 process(es), master crash-0.crash.ml.svc:29500
[rank0]: Traceback (most recent call last):
[rank0]:   File "/app/crash.py", line 7, in <module>
[rank0]:     raise RuntimeError(f"boom at step {step} on rank {rank}")
[rank0]: RuntimeError: boom at step 5 on rank 0
[rank1]: Traceback (most recent call last):
[rank1]:   File "/app/crash.py", line 8, in <module>
[rank1]:     dist.barrier()
[rank1]:   File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 83, in wrapper
[rank1]:     return func(*args, **kwargs)
[rank1]:            ^^^^^^^^^^^^^^^^^^^^^
[rank1]:   File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 6371, in barrier
[rank1]:     work.wait()
[rank1]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection closed by \
peer [127.0.0.1]:4319. This is typically caused by a remote worker crashing.
E1129 07:00:37.744000 1847 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 0 \
(pid: 1866) of binary: /venv/bin/python
"""
CAUSE = "[rank0]: RuntimeError: boom at step 5 on rank 0"


def test_the_first_ranks_own_exception_is_the_line_with_its_rank_not_torchruns():
    assert error_line(CRASH) == CAUSE
    # The termination message ddpjob-launch leaves is that line alone.
    assert error_line(CAUSE + "\n") == CAUSE


def test_a_tail_cut_inside_the_traceback_still_finds_its_exception():
    tail = CRASH.split("\n", 3)[3]  # begins at rank 0's second frame line, its header cut
    assert tail.startswith("[rank0]:     raise") and error_line(tail) == CAUSE
    # Cut after rank 0's exception: rank 1's is what is left, with its rank.
    rest = CRASH.split("\n", 5)[5]
    assert error_line(rest).startswith("[rank1]: RuntimeError: [/__w/pytorch")


def test_a_chained_exception_is_said_by_its_last_line_and_tracebacks_without_ranks_work():
    chained = """\
Traceback (most recent call last):
  File "/app/train.py", line 3, in load
KeyError: 'weights'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/app/train.py", line 9, in <module>
ValueError: checkpoint /ckpt/last.pt has no weights
"""
    assert error_line(chained) == "ValueError: checkpoint /ckpt/last.pt has no weights"
    # A custom exception whose name ends in neither Error nor Exception, and a bare one.
    assert (
        error_line('Traceback (most recent call last):\n  File "x.py", line 1\nmymod.Boom: no\nbye') == "mymod.Boom: no"
    )
    assert (
        error_line('[rank3]: Traceback (most recent call last):\n[rank3]:   File "x.py"\n[rank3]: KeyboardInterrupt')
        == "[rank3]: KeyboardInterrupt"
    )


def test_without_a_traceback_the_first_error_line_else_the_last_line():
    assert (
        error_line("loading\nddpjob-launch: error: MASTER_ADDR did not resolve\nbye")
        == "ddpjob-launch: error: MASTER_ADDR did not resolve"
    )
    assert error_line("just\nthe last line\n\n") == "the last line" and error_line("") is None
    assert error_line(None) is None
    assert len(error_line("ValueError: " + "x" * 5000)) == 300


def test_a_reader_fed_line_by_line_keeps_the_first_rank_to_raise():
    reader = Reader()
    for line in CRASH.splitlines():
        reader.feed(line + "\n")
    assert reader.cause() == (0, "RuntimeError: boom at step 5 on rank 0")


def test_a_handled_traceback_logged_earlier_is_not_why_the_rank_ended():
    reader = Reader()
    log = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "io.py", line 3, in fetch
[rank0]: ConnectionRefusedError: [Errno 111] Connection refused
[rank0]: fetched on the second try
[rank1]: Traceback (most recent call last):
[rank1]:   File "train.py", line 9, in <module>
[rank1]: ValueError: bad shard 3
[rank0]: Traceback (most recent call last):
[rank0]:   File "train.py", line 12, in <module>
[rank0]: RuntimeError: Connection closed by peer [10.0.0.2]:4319
"""
    for line in log.splitlines():
        reader.feed(line)
    # Rank 0 logged a refused connection it got over; rank 1's exception came before rank 0's end.
    assert reader.exception() == (1, "ValueError: bad shard 3")
    assert error_line(log) == "[rank1]: ValueError: bad shard 3"


def test_argparse_line_of_a_rank_is_still_bad_input():
    assert never_retried(2, "Error", "[rank0]: ddpjob-train: error: --epochs must be positive")
    assert never_retried(2, "Error", "ddpjob-train: error: --epochs must be positive")
    assert not never_retried(2, "Error", "[rank0]: RuntimeError: boom")


def test_the_same_failure_is_told_apart_from_times_pids_addresses_and_ids():
    a = (
        "E1129 07:00:37.744000 1847 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) "
        "local_rank: 0 (pid: 1866) of binary: /venv/bin/python"
    )
    b = (
        "E1129 07:02:11.020000 2291 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) "
        "local_rank: 0 (pid: 2310) of binary: /venv/bin/python"
    )
    assert a != b and same_failure_key(a) == same_failure_key(b)
    peer = "[rank1]: RuntimeError: [pair.cc:561] Connection closed by peer [{}]:{}. A remote worker crashed."
    assert same_failure_key(peer.format("10.0.3.7", 4319)) == same_failure_key(peer.format("10.0.4.2", 55012))
    assert same_failure_key(peer.format("::1", 4319)) == same_failure_key(peer.format("fe80::2", 4400))
    assert same_failure_key(
        "ValueError: tensor at 0x7f3a2c01d9e0 freed at 2026-11-29T07:00:37Z, id "
        "0d1c2b3a-0000-4000-8000-000000000001 in /tmp/tmpk2j3h4xq"
    ) == same_failure_key(
        "ValueError: tensor at 0x7f11000aa210 freed at 2026-11-29T07:09:01.5Z, id "
        "9e8d7c6b-1111-4000-8000-000000000002 in /tmp/tmp0a9zz81m"
    )
    assert same_failure_key("dial crash-0.crash.ml.svc:29500 refused") == same_failure_key(
        "dial crash-0.crash.ml.svc:41213 refused"
    )
    # What the program says of its own work stays: another step, rank or value is another failure.
    assert same_failure_key(CAUSE) == CAUSE
    assert same_failure_key(CAUSE) != same_failure_key(CAUSE.replace("step 5", "step 6"))
    assert same_failure_key(CAUSE) != same_failure_key(CAUSE.replace("[rank0]", "[rank1]"))


def test_a_line_that_blames_the_network_or_a_wait_is_transient():
    assert transient("[rank1]: RuntimeError: [pair.cc:561] Connection closed by peer [10.0.0.1]:4319")
    assert transient("torch.distributed.DistNetworkError: failed to connect to crash-0:29500")
    assert transient("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970")
    assert transient("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients")
    assert not transient(CAUSE)
    assert not transient("ddpjob_trainer.env.UsageError: DDPJOB_BACKEND=nccl but this process has no CUDA device")


# A node whose worker segfaulted in gloo's pair while its watcher thread slept (faulthandler's
# dump, Python 3.11), then its peer's broken connection and torchrun's line.
SEGFAULT = """\
ddpjob-launch: node 1/2, 1 process(es), master job-0.job.ml.svc:29500
step 40 loss 0.61
Fatal Python error: Segmentation fault

Thread 0x00007efecf7566c0 (most recent call first):
  File "/usr/local/lib/python3.11/threading.py", line 331 in wait
  File "/usr/local/lib/python3.11/dist-packages/ddpjob_trainer/watcher.py", line 62 in _run

Current thread 0x00007efed03d9b80 (most recent call first):
  File "/usr/local/lib/python3.11/dist-packages/torch/distributed/distributed_c10d.py", line 2851 in all_reduce
  File "/usr/local/lib/python3.11/dist-packages/torch/distributed/c10d_logger.py", line 83 in wrapper
  File "/app/train.py", line 21 in average
  File "/app/train.py", line 40 in <module>

Extension modules: numpy.core._multiarray_umath, torch._C (total: 2)
[rank0]: Traceback (most recent call last):
[rank0]:   File "/app/train.py", line 21, in average
[rank0]: RuntimeError: Connection closed by peer [10.0.0.2]:4319
"""
WHERE = "Fatal Python error: Segmentation fault: in all_reduce (torch/distributed/distributed_c10d.py:2851), from"


def test_a_crash_says_the_crashing_threads_innermost_frame_and_the_programs_own():
    assert error_line(SEGFAULT) == f"{WHERE} average (/app/train.py:21)"


def test_a_crash_before_another_ranks_exception_is_the_cause_and_after_it_is_not():
    reader = Reader()
    for line in SEGFAULT.splitlines():
        reader.feed(line)
    assert reader.failure() == (None, f"{WHERE} average (/app/train.py:21)")
    assert reader.exception() == (0, "RuntimeError: Connection closed by peer [10.0.0.2]:4319")
    later = Reader()
    for line in (CRASH + SEGFAULT.split("[rank0]: Traceback")[0]).splitlines():
        later.feed(line)
    assert later.failure() == (0, "RuntimeError: boom at step 5 on rank 0")


def test_a_crash_in_the_programs_own_frame_or_without_one_says_what_it_has():
    own = "Fatal Python error: Aborted\n\nCurrent thread 0x00007f (most recent call first):\n" + (
        '  File "/app/train.py", line 9 in step\n  File "/app/train.py", line 30 in main\n'
    )
    assert error_line(own) == "Fatal Python error: Aborted: in step (/app/train.py:9)"
    native = "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):\n"
    native += "  <no Python frame>\n"
    assert error_line(native) == "Fatal Python error: Segmentation fault"


def test_a_crash_in_a_thread_that_is_none_of_pythons_says_so():
    """Python's threads are dumped, but no `Current thread`: the signal came in a native
    library's own thread (here as the kind tier once saw it, during the finalization)."""
    dump = "Fatal Python error: Aborted\n\nThread 0x00007f65d46572c0 (most recent call first):\n"
    dump += "  <no Python frame>\n\nExtension modules: torch._C (total: 1)\n"
    assert error_line(dump) == "Fatal Python error: Aborted: in a native thread"
