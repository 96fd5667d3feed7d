"""The parts of a resize in place that need no second process: interrupts, the node's
store and the notices it takes over HTTP, tearing groups down per backend (NCCL's abort
and shrink mocked: no GPU here), and torchrun's line for a planned stop."""

import http.client
import logging
import socket
import time
from unittest import mock

import pytest
import torch
import torch.distributed as dist

from ddpjob import notice
from ddpjob.local.ports import free_port
from ddpjob_trainer import _torchrun, group_reset, private_api
from ddpjob_trainer.interrupt import GroupLost, Interrupts
from ddpjob_trainer.node_store import NodeStore
from ddpjob_trainer.progress_server import serve_in_thread
from ddpjob_trainer.roster import Generation


def test_a_trip_ends_every_tracked_wait_of_its_generation_only():
    ir = Interrupts()
    ir.reset(3)
    never: torch.futures.Future = torch.futures.Future()  # a collective blocked on a frozen peer
    tracked = ir.track(never)
    ir.trip("from an older generation", 2)
    assert not tracked.done()
    time.sleep(0.05)
    assert ir.oldest_wait() >= 0.05
    ir.trip("node 2 was lost", 3)
    with pytest.raises(GroupLost, match="node 2 was lost"):
        tracked.wait()
    with pytest.raises(GroupLost):  # tripped: what starts now fails at once
        ir.track(torch.futures.Future()).wait()
    never.set_result(None)  # the abandoned collective ends later: nothing breaks
    ir.reset(4)
    done: torch.futures.Future = torch.futures.Future()
    out = ir.track(done)
    done.set_result(7)
    assert out.wait() == 7 and ir.oldest_wait() == 0


def test_a_failed_collective_is_a_lost_peer():
    ir = Interrupts()
    failing: torch.futures.Future = torch.futures.Future()
    out = ir.track(failing)
    failing.set_exception(RuntimeError("[gloo/transport/tcp/pair.cc:545] Read error: Connection reset by peer"))
    with pytest.raises(GroupLost, match="Connection reset"):
        out.wait()


def test_the_launcher_takes_authentic_notices_into_the_node_store(tmp_path):
    port, http_port = free_port(), free_port()
    store = NodeStore("127.0.0.1", port)
    gen = Generation(5, (0, 2, 3), 1, ("a", "b", "c"), (1, 1, 1), 0)
    store.server.set("pointer", gen.text())
    token = notice.job_token(b"k", "ns", "j", "u")
    server = serve_in_thread(str(tmp_path / "progress.json"), "127.0.0.1", http_port, (token, store.notice))
    try:
        assert notice.post("127.0.0.1", http_port, token, [1], time.time()) == 204  # not a member: it ends nothing
        assert not store.server.check(["lost/5/1"]) and not store.server.check(["fail/5"])
        assert notice.post("127.0.0.1", http_port, "forged", [2], time.time()) == 401
        assert not store.server.check(["lost/5/2"])
        assert notice.post("127.0.0.1", http_port, token, [2], time.time()) == 204
        assert store.server.check(["lost/5/2"]) and store.server.check(["fail/5"])
        # Node 2 came back (generation 7): the notice was about generation 5, and leaves
        # the next round of 7 alone; a new notice is about 7.
        store.server.set("pointer", Generation(7, (0, 2, 3), 1, ("a", "d", "c"), (9, 9, 9), 0).text())
        assert not store.server.check(["lost/7/2"])
        # Another notice, so another time: the same body within the same millisecond is a
        # replay (409), which a fast machine once met here.
        assert notice.post("127.0.0.1", http_port, token, [2], time.time() + 0.01) == 204
        assert store.server.check(["lost/7/2"]) and store.server.check(["fail/7"])
        conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=5)
        conn.request("POST", notice.PATH, body=b"x" * (notice.MAX_BODY + 1))
        assert conn.getresponse().status == 413
        conn.close()
        assert len(store.boot) == 16
    finally:
        server.shutdown()


def test_a_second_store_on_a_taken_port_waits_then_says_so():
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    with mock.patch("ddpjob_trainer.node_store.BIND_SECONDS", 0.6), pytest.raises(OSError):
        NodeStore("127.0.0.1", held.getsockname()[1])
    held.close()


def test_abandoning_a_gloo_group_takes_it_out_of_the_registry_without_waiting():
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        assert not group_reset.can_shrink()  # gloo re-forms through the store
        before = len(group_reset.ABANDONED)
        assert group_reset.abandon() == 1 and not dist.is_initialized()
        assert len(group_reset.ABANDONED) == before + 1  # kept alive until the process ends
        dist.init_process_group("gloo", store=dist.PrefixStore("g2/", store), rank=0, world_size=1)
        t = torch.ones(2)
        dist.all_reduce(t)
        assert t.tolist() == [1.0, 1.0]
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        group_reset.ABANDONED.clear()


def test_nccl_shrinks_the_survivors_communicator_after_abandoning_the_cpu_group():
    """NCCL is not measured here (no GPU): the calls torch makes are checked instead."""
    new_group, cpu_group, new_store = object(), object(), object()
    registry = {new_group: ("nccl", "old store")}
    with (
        mock.patch.object(private_api, "group_registry", return_value=registry),
        mock.patch.object(private_api, "abort_process_group") as abort,
        mock.patch.object(group_reset.dist, "shrink_group", return_value=new_group) as shrink,
    ):
        group_reset.shrink([3, 2], [cpu_group], new_store)
    abort.assert_called_once_with(cpu_group)
    shrink.assert_called_once_with([2, 3], shrink_flags=group_reset.c10d.SHRINK_ABORT)
    assert registry[new_group] == ("nccl", new_store)
    group_reset.ABANDONED.clear()


def test_can_shrink_asks_the_backend():
    backend = mock.Mock(supports_shrinking=True)
    group = mock.Mock(**{"_get_backend.return_value": backend})
    assert group_reset.can_shrink(group)
    backend.supports_shrinking = False
    assert not group_reset.can_shrink(group)


def test_torchruns_error_line_for_a_planned_stop_becomes_information(caplog):
    log = logging.getLogger("torch.distributed.elastic.multiprocessing.api")
    log.addFilter(_torchrun.QuietStop())
    with caplog.at_level(logging.INFO, logger=log.name):
        log.error("failed (exitcode: %s) local_rank: %s (pid: %s) of binary: %s", 143, 0, 42, "python")
        log.error("failed (exitcode: %s) local_rank: %s (pid: %s) of binary: %s", 1, 0, 43, "python")
    planned, failed = caplog.records[-2:]
    assert planned.levelno == logging.INFO and "stopped when asked" in planned.getMessage()
    assert "failed" not in planned.getMessage()
    assert failed.levelno == logging.ERROR and "exitcode: 1" in failed.getMessage()


def test_a_newcomer_takes_a_peers_state_and_a_trip_ends_a_wait_on_a_silent_peer(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parent / "scripts" / "transfer_probe.py"
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(r), str(tmp_path / "rdzv"), str(tmp_path / "out")],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in (0, 1)
    ]
    outs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    r0, r1 = (json.loads((tmp_path / f"out{r}.json").read_text()) for r in (0, 1))
    assert r1["weight"] == r0["weight"] and r1["exp_avg"] == r0["exp_avg"] and r1["pos"] == [1, 2, 3]
    assert r0["names"] == r1["names"] == ["rank0", "rank1"]
    assert r1["ended"] == "peer lost"


@pytest.mark.parametrize("epochs_done, joined", [(2, False), (1, True)])
def test_a_newcomer_for_a_finished_job_does_nothing_instead_of_waiting_alone(tmp_path, epochs_done, joined):
    """Node 0 created again after the others finished finds its own store alive: without
    the checkpoint's word it would wait alone for a first round (600 s)."""
    from types import SimpleNamespace

    from ddpjob_trainer.resize import InPlace

    (tmp_path / f"ckpt-e{epochs_done:05d}-s0000000063-0123456789abcdef.pt").write_bytes(b"")
    said = []
    in_place = object.__new__(InPlace)
    in_place.t = SimpleNamespace(
        args=SimpleNamespace(checkpoint_dir=str(tmp_path), epochs=2), progress=SimpleNamespace(say=said.append)
    )
    in_place.el = mock.Mock(join=mock.Mock(side_effect=RuntimeError("joined")))
    if joined:
        with pytest.raises(RuntimeError, match="joined"):  # training is not over: it joins
            in_place.join()
    else:
        assert in_place.join() is False and in_place.el.join.call_count == 0
        assert "training is over" in said[0]


def test_a_resize_after_a_loss_tells_only_the_members_not_judged_lost(monkeypatch):
    """The survivor that re-forms tells the others of the failure, but not a member its
    watcher judged lost: a frozen node's store holds whoever calls it (the kind tier's paused
    node: the survivor stuck for good after its step)."""
    from types import SimpleNamespace

    from ddpjob_trainer import elastic

    told, formed = [], []
    prev = Generation(3, (0, 1, 2), 1, ("a", "b", "c"), (9, 9, 9), 0)
    after = Generation(4, (0, 1), 1, ("a", "b"), (9, 9), 0)
    el = SimpleNamespace(
        current=prev,
        backend="gloo",
        nproc=1,
        stores=SimpleNamespace(announce=lambda nodes, key: told.append((list(nodes), key))),
        watcher=SimpleNamespace(lost=lambda generation, node: generation == 3 and node == 2),
        rounds=SimpleNamespace(form=lambda p, step, deadline, **kw: formed.append(kw) or after),
        _install=lambda gen, t0, shrink=None: gen,
    )
    monkeypatch.setattr(group_reset, "abandon", lambda: None)
    gen = elastic.Elastic.resize(el, 9, failed=True)
    assert gen.nodes == (0, 1)
    assert told == [([0, 1], "fail/3")], told
    assert formed[0]["lost"] == [2]


@pytest.mark.parametrize("epochs_done", [2, 1])
def test_a_node_the_others_finished_without_ends_as_they_did_not_as_a_failure(tmp_path, epochs_done):
    """A node left out near the end (judged lost, then re-forming) finds nobody: they
    finished. With the checkpoint saying so it ends with them (exit 0); a failure (142)
    would restart the finished job's gang (the kind tier's elastic job, once)."""
    from types import SimpleNamespace

    from ddpjob_trainer.resize import InPlace, Regroup, TrainingOver
    from ddpjob_trainer.roster import NoGroup

    (tmp_path / f"ckpt-e{epochs_done:05d}-s0000000063-0123456789abcdef.pt").write_bytes(b"")
    in_place = object.__new__(InPlace)
    in_place.t = SimpleNamespace(
        args=SimpleNamespace(checkpoint_dir=str(tmp_path), epochs=2),
        progress=SimpleNamespace(say=lambda _line: None),
        micro=SimpleNamespace(model=None),
        model=None,
        optimizer=mock.Mock(),
        samples=None,
        stop=SimpleNamespace(signum=0),
        pos=SimpleNamespace(step=63),
    )
    gen = Generation(5, (0, 1, 2), 1, ("a", "b", "c"), (63, 63, 63), 0)
    resize = mock.Mock(side_effect=NoGroup("no node of generation 6 ([0, 1]) answers (looked for 30s)"))
    in_place.el = SimpleNamespace(gen=gen, resize=resize)
    expected = TrainingOver if epochs_done == 2 else NoGroup
    with pytest.raises(expected, match="generation 6"):
        in_place.regroup(Regroup(failed=True))
    assert resize.call_count == 1 and resize.call_args.kwargs["over"]() is (epochs_done == 2)
