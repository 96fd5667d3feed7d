"""The checkpoint fence (fence.py) and the checkpoint order it gives (checkpoint.py): a
writer the job moved on without never wins, never commits, never outlives a current file
in `prune`; names written before the fence still load."""

import json
import os
import signal
import subprocess
import threading
import time

import pytest
import torch

from ddpjob import progress_record
from ddpjob_trainer import checkpoint, fence
from ddpjob_trainer.progress import Progress
from tests.support.deadlines import RUN
from tests.trainer import trainer_helpers
from tests.trainer.trainer_helpers import BIN, clean_env


def _payload(epoch, step, value=0.0):
    return {"model_name": "mlp", "model": {"w": torch.full((2, 2), value)}, "epoch": epoch, "step": step}


def _claim(directory, attempt=0, **kw) -> fence.Claim:
    return fence.claim(str(directory), fence.Claim(job="ns/j", attempt=attempt, **kw))


def test_a_stale_writer_with_more_steps_never_wins(tmp_path):
    old = _claim(tmp_path, attempt=0)
    checkpoint.save(str(tmp_path), _payload(3, 900, 1.0), keep=5, claim=old)
    new = _claim(tmp_path, attempt=1)
    current = checkpoint.save(str(tmp_path), _payload(1, 300, 2.0), keep=5, claim=new)
    path, payload = checkpoint.newest(str(tmp_path))
    assert path == current and payload["step"] == 300
    assert [step for step, _ in checkpoint.candidates(str(tmp_path))] == [300, 900]
    assert checkpoint.newest_epoch(str(tmp_path)) == 1  # the newest term's, not the most epochs on disk
    assert f"-t{new.term:08d}-" in os.path.basename(current)


def test_prune_keeps_the_current_term_over_a_stale_higher_step(tmp_path):
    old = _claim(tmp_path, attempt=0)
    stale_files = [checkpoint.save(str(tmp_path), _payload(9, 900 + i), keep=5, claim=old) for i in range(3)]
    new = _claim(tmp_path, attempt=1)
    mine = [checkpoint.save(str(tmp_path), _payload(1, 100 + i), keep=2, claim=new) for i in range(2)]
    left = [p for _, p in checkpoint.candidates(str(tmp_path))]
    assert left == mine[::-1] and not any(os.path.exists(p) for p in stale_files)


def test_a_stale_commit_is_refused_and_leaves_nothing(tmp_path):
    old = _claim(tmp_path, attempt=0)
    kept = checkpoint.save(str(tmp_path), _payload(1, 10), keep=5, claim=old)
    _claim(tmp_path, attempt=1)  # the job moved on
    with pytest.raises(fence.Superseded, match=r"not committing checkpoint ckpt-e00002-s0000000990-t00000001-"):
        checkpoint.save(str(tmp_path), _payload(2, 990), keep=5, claim=old)
    assert sorted(os.listdir(tmp_path)) == sorted([os.path.basename(kept), fence.SUBDIR])


def test_a_term_claimed_during_the_rename_takes_the_file_back(tmp_path, monkeypatch):
    old = _claim(tmp_path, attempt=0)
    real = os.replace

    def late_claim(src, dst):  # the new attempt claims between the writer's check and its rename
        if str(dst).endswith(".pt"):
            _claim(tmp_path, attempt=1)
        real(src, dst)

    monkeypatch.setattr(checkpoint.os, "replace", late_claim)
    with pytest.raises(fence.Superseded):
        checkpoint.save(str(tmp_path), _payload(2, 990), keep=5, claim=old)
    assert checkpoint.candidates(str(tmp_path)) == []


def test_names_without_a_term_still_load_below_fenced_ones(tmp_path):
    fenced = checkpoint.save(str(tmp_path), _payload(1, 10, 1.0), keep=5, claim=_claim(tmp_path))
    # A name written before the fence: the same bytes, the same digest, no term.
    legacy = checkpoint.save(str(tmp_path), _payload(5, 50, 5.0), keep=5)
    renamed = legacy.replace("-t00000000-", "-")
    os.rename(legacy, renamed)
    assert checkpoint.newest(str(tmp_path))[0] == fenced
    os.remove(fenced)
    path, payload = checkpoint.newest(str(tmp_path))
    assert path == renamed and payload["step"] == 50 and checkpoint.newest_epoch(str(tmp_path)) == 5


def test_a_stale_fresh_start_is_refused(tmp_path):
    fence.claim(str(tmp_path), fence.Claim(job="ns/j", run="r1", attempt=2))
    for attempt in (0, 1):
        with pytest.raises(fence.Superseded, match="held by attempt 2, generation 0 of ns/j, and this is attempt"):
            fence.claim(str(tmp_path), fence.Claim(job="ns/j", run="r1", attempt=attempt))
    assert fence.claim(str(tmp_path), fence.Claim(job="ns/j", run="r1", attempt=2)).term == 2  # same attempt
    assert fence.claim(str(tmp_path), fence.Claim(job="ns/j", run="r1", attempt=3)).term == 3


def test_a_new_run_of_the_job_always_claims(tmp_path):
    fence.claim(str(tmp_path), fence.Claim(job="ns/j", run="", attempt=3))
    # A rigid job has no incarnation: its attempt 0 is a rerun (attempts count from 0 again).
    assert _claim(tmp_path, attempt=0).term == 2
    assert _claim(tmp_path, attempt=1).term == 3
    assert _claim(tmp_path, attempt=5, run="r").term == 4
    with pytest.raises(fence.Superseded):
        _claim(tmp_path, attempt=0, run="r")  # attempt 0 of a known incarnation is judged too
    assert _claim(tmp_path, attempt=0, run="r2").term == 5  # another incarnation
    assert fence.claim(str(tmp_path), fence.Claim(job="ns/other", run="r2", attempt=0)).term == 6  # another job


def test_of_two_groups_re_formed_from_one_generation_only_the_first_goes_on(tmp_path):
    first = _claim(tmp_path, generation=1, group="g1")
    a = fence.succeed(str(tmp_path), first, 2, "side-a", "g1")
    assert (a.term, a.generation, a.group) == (2, 2, "side-a")
    with pytest.raises(fence.Superseded, match="held by attempt 0, generation 2"):
        fence.succeed(str(tmp_path), first, 2, "side-b", "g1")
    # The winner's next group goes on; a peer lost while its claimant told the others: the
    # claim on disk is the group's own line (its parent's), not another group's.
    assert fence.succeed(str(tmp_path), a, 3, "a3", "side-a").term == 3
    assert fence.succeed(str(tmp_path), a, 4, "a4", "a3").term == 4
    with pytest.raises(fence.Superseded):
        fence.succeed(str(tmp_path), a, 4, "a4", "side-a")


def test_racing_claimants_each_get_their_own_term(tmp_path):
    got: list[int] = []
    lock = threading.Lock()

    def one():
        term = _claim(tmp_path, attempt=1).term
        with lock:
            got.append(term)

    threads = [threading.Thread(target=one) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(got) == list(range(1, 11))
    assert fence.holder(str(tmp_path)).term == 10
    assert len(fence.terms(str(tmp_path))) == fence.KEEP


def test_a_hostile_claim_file_is_an_unknown_holder(tmp_path):
    folder = tmp_path / fence.SUBDIR
    folder.mkdir()
    (folder / "0000000007.json").write_bytes(b'{"job": "ns/j", "run": "", "attempt": "9", "generation": 0}')
    held = fence.holder(str(tmp_path))
    assert (held.term, held.job) == (7, "?")
    assert _claim(tmp_path, attempt=1).term == 8  # judged against no one
    (folder / fence.POINTER).write_text(json.dumps({"term": 12}))
    assert fence.holder(str(tmp_path)).term == 12  # a listing NFS cached is not the last word


def test_identity_from_the_contract_keeps_the_token_off_the_volume():
    env = {"DDPJOB_NAME": "j", "DDPJOB_NAMESPACE": "ns", "DDPJOB_RESTART_COUNT": "4", "DDPJOB_NOTICE_TOKEN": "s3cr3t"}
    me = fence.identity(env, generation=2)
    assert (me.job, me.attempt, me.generation, len(me.run)) == ("ns/j", 4, 2, 16)
    assert "s3cr3t" not in json.dumps(me.__dict__)
    assert fence.identity({}) == fence.Claim()


def test_metrics_lines_and_the_progress_record_say_who_wrote_them(tmp_path):
    metrics, record = tmp_path / "m.jsonl", tmp_path / "progress.json"
    p = Progress(True, str(metrics), 3, 1, 1, torch.device("cpu"), progress_file=str(record))
    p.authority = {"generation": 5, "term": 7}
    p.publish(0, 0)
    p.record("step", epoch=1, step=1, loss=0.5)
    p.close()
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [(r["event"], r["restart"], r["generation"], r["term"]) for r in lines] == [
        ("position", 3, 5, 7),
        ("step", 3, 5, 7),
    ]
    written = json.loads(record.read_text())
    assert (written["restart"], written["generation"], written["term"]) == (3, 5, 7)


def test_a_writer_that_learns_the_job_moved_on_writes_nothing_more(tmp_path):
    mine = _claim(tmp_path, attempt=0)
    p = Progress(True, str(tmp_path / "m.jsonl"), 0, 1, 1, torch.device("cpu"), progress_file=str(tmp_path / "p.json"))
    p.authority, p.fenced = {"term": mine.term}, (str(tmp_path), mine)
    p.publish(0, 0)
    _claim(tmp_path, attempt=1)
    p.fence_checked = 0.0  # (read at most once a second)
    p.step(1, 1, 0.5, 0.5, 10.0)
    p.close()
    assert [r["event"] for r in trainer_helpers.metrics(tmp_path / "m.jsonl")] == ["position"]
    assert json.loads((tmp_path / "p.json").read_text())["step"] == 0
    assert p.superseded and "term 2 of the checkpoint fence is held by attempt 1" in p.superseded


def test_a_volume_that_takes_no_claim_trains_and_saves_as_before(tmp_path, monkeypatch, capsys):
    from ddpjob_trainer.train import main

    for name in trainer_helpers.CONTRACT:
        monkeypatch.delenv(name, raising=False)

    def refused(*_):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(fence, "_create", refused)
    args = ["--epochs", "1", "--synthetic-size", "64", "--batch-size", "32", "--checkpoint-dir", str(tmp_path)]
    assert main(args) == 0
    assert "warning: no term of the checkpoint fence (" in capsys.readouterr().out
    assert "-t00000000-" in checkpoint.newest(str(tmp_path))[0]


JOB = ["--epochs", "2", "--synthetic-size", "16384", "--batch-size", "32"]  # 512 steps an epoch
SLOW = dict(DDPJOB_NAME="j", DDPJOB_NAMESPACE="ns", DDPJOB_TEST_STEP_SECONDS="0.1")  # no epoch ends in a test


def _start(ckpt, attempt, *extra, **env):
    return subprocess.Popen(
        [str(BIN / "ddpjob-train"), *JOB, "--checkpoint-dir", str(ckpt), *extra],
        env=clean_env(**SLOW, DDPJOB_RESTART_COUNT=attempt, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait(proc, done):
    deadline = time.monotonic() + RUN
    while not done():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[0][-3000:]
        time.sleep(0.05)


def _records(ckpt):  # both write the job's one metrics.jsonl, as on a shared volume
    return trainer_helpers.metrics(ckpt / "metrics.jsonl") if (ckpt / "metrics.jsonl").exists() else []


@pytest.mark.slow
def test_an_attempt_the_job_moved_on_without_cannot_save_over_the_next_one(tmp_path):
    """Two trainers on one checkpoint directory: attempt 0 trains on (a Pod a partition left
    behind; it logs no step, so only its save can learn of the fence), attempt 1 starts,
    saves on SIGTERM and stops; then attempt 0 is asked to stop with more steps done than
    attempt 1 saved. Its checkpoint is refused, and the next resume picks attempt 1's."""
    ckpt, beat = tmp_path / "ckpt", tmp_path / "old" / "progress.json"
    beat.parent.mkdir()

    def old_step():
        return max((b["step"] for b in progress_record.read_heartbeats(str(beat)).values()), default=0)

    old = _start(ckpt, 0, "--log-every", "100000", DDPJOB_PROGRESS_FILE=beat)
    try:
        _wait(old, lambda: old_step() >= 1)
        new = _start(ckpt, 1, "--log-every", "1")
        try:
            _wait(new, lambda: any(r["event"] == "step" and r["restart"] == 1 for r in _records(ckpt)))
            new.send_signal(signal.SIGTERM)
            out_new = new.communicate(timeout=RUN)[0]
        finally:
            new.kill()
        assert new.returncode == 143, out_new[-3000:]
        saved = checkpoint.newest(str(ckpt))
        assert saved is not None and "-t00000002-" in saved[0], out_new[-3000:]
        _wait(old, lambda: old_step() > saved[1]["step"] + 1)
        old.send_signal(signal.SIGTERM)
        out_old = old.communicate(timeout=RUN)[0]
    finally:
        old.kill()
    assert old.returncode == 143, out_old[-3000:]
    assert "stop requested (signal 15): saving a checkpoint" in out_old
    refused = [line for line in out_old.splitlines() if "not committing checkpoint" in line]
    assert len(refused) == 1 and refused[0].startswith("ddpjob-train: stopping: not committing checkpoint ckpt-")
    assert checkpoint.newest(str(ckpt))[0] == saved[0]
    assert [p for _, p in checkpoint.candidates(str(ckpt))] == [saved[0]]
    # Every line says who wrote it; attempt 0 wrote none after attempt 1 claimed term 2.
    records = _records(ckpt)
    assert {(r["restart"], r["term"]) for r in records} == {(0, 1), (1, 2)}
    first_new = min(i for i, r in enumerate(records) if r["restart"] == 1)
    assert all(r["restart"] == 1 for r in records[first_new:])


@pytest.mark.slow
def test_a_trainer_stops_soon_after_the_job_moved_on_without_it(tmp_path):
    """A writer that logs learns of a newer term from the fence within about a second, and
    stops every rank at that step's end, its checkpoint refused, its log written no more."""
    ckpt = tmp_path / "ckpt"
    old = _start(ckpt, 0, "--log-every", "1")
    try:
        _wait(old, lambda: any(r["event"] == "step" for r in _records(ckpt)))
        fence.claim(str(ckpt), fence.Claim(job="ns/j", attempt=1))  # the next attempt's rank 0
        out = old.communicate(timeout=RUN)[0]
    finally:
        old.kill()
    assert old.returncode == 143, out[-3000:]
    assert "stop requested" not in out
    refused = [line for line in out.splitlines() if "not committing checkpoint" in line]
    assert len(refused) == 1 and refused[0].startswith("ddpjob-train: stopping: not committing checkpoint ckpt-")
    assert checkpoint.candidates(str(ckpt)) == []
    assert {r["event"] for r in _records(ckpt)} == {"start", "position", "step"}  # no stop, no end said
