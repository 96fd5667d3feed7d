"""A followed container log, as the node's kubelet server reads it for the real API
server: whole lines while the container runs, its last partial line once it has exited,
and the end of the stream after that."""

from __future__ import annotations

from ddpjob_devcluster.kubelet.container_log import LogReader


def test_a_followed_log_gives_whole_lines_then_the_rest_once_exited(tmp_path) -> None:
    log = tmp_path / "trainer.log"
    log.write_bytes(b"[p-0] one\n[p-0] tw")
    running = [True]
    reader = LogReader("p-0", log, lambda: running[0], follow=True)
    assert reader.head(None) == b"one\n"  # the partial line waits for its newline
    assert reader.next() == b""  # nothing whole yet: poll again
    with log.open("ab") as f:
        f.write(b"o\n[p-0] thr")
    assert reader.next() == b"two\n"
    running[0] = False
    assert reader.next() == b"thr"  # exited: what it wrote last, newline or not
    assert reader.next() is None  # and then the end


def test_tail_counts_whole_lines_and_a_missing_file_is_empty(tmp_path) -> None:
    log = tmp_path / "trainer.log"
    log.write_bytes(b"a\nb\nc\n")
    assert LogReader("p", log, lambda: False, follow=False).head(2) == b"b\nc\n"
    reader = LogReader("p", tmp_path / "not-yet.log", lambda: False, follow=True)
    assert reader.head(None) == b"" and reader.next() is None
