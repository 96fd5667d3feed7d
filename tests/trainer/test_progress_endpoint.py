"""ddpjob-train writes the progress record and heartbeats; ddpjob-launch serves them on
/progress and /metrics; the hang testing aid stops rank 1 without exiting."""

import json
import signal
import subprocess
import time
import urllib.request

from ddpjob import progress_record
from ddpjob.local.ports import free_port
from tests.support.deadlines import RUN
from tests.trainer.trainer_helpers import BIN, clean_env, contract, events, train


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read()


def wait_for(predicate, timeout=90.0, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except OSError as e:  # not serving yet
            last = e
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def test_single_process_writes_the_record_at_log_steps_and_epoch_ends(tmp_path):
    path = tmp_path / "run" / "progress.json"
    r = train(
        [
            "--epochs",
            "2",
            "--synthetic-size",
            "256",
            "--batch-size",
            "32",
            "--log-every",
            "3",
            "--metrics-file",
            str(tmp_path / "m.jsonl"),
        ],
        clean_env(DDPJOB_PROGRESS_FILE=str(path)),
    )
    assert r.returncode == 0, r.stderr
    record = progress_record.read(str(path))
    # 256 / 32 = 8 steps per epoch, 2 epochs: the last write is the last epoch's end.
    assert record["step"] == 16 and record["total_steps"] == 16
    assert record["epoch"] == 2 and record["total_epochs"] == 2
    assert record["loss"] == events(tmp_path / "m.jsonl", "epoch")[-1]["loss"]
    beat = json.loads((tmp_path / "run" / "progress.json.rank0").read_text())
    assert beat["rank"] == 0 and beat["step"] == 16


def test_launcher_serves_progress_and_names_the_rank_that_hangs(tmp_path):
    path, port = tmp_path / "progress.json", free_port()
    env = contract(
        nproc=2,
        DDPJOB_PROGRESS_FILE=str(path),
        DDPJOB_PROGRESS_PORT=port,
        DDPJOB_PROGRESS_HOST="127.0.0.1",
        DDPJOB_TEST_HANG_AT_STEP=3,
        DDPJOB_CHECKPOINT_DIR=str(tmp_path / "ckpt"),
    )
    proc = subprocess.Popen(
        [
            str(BIN / "ddpjob-launch"),
            "ddpjob-train",
            "--synthetic-size",
            "512",
            "--batch-size",
            "16",
            "--log-every",
            "1",
            "--epochs",
            "1",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:

        def hung():
            snap = json.loads(get(base + "/progress"))
            ranks = snap["ranks"]
            ok = (
                snap["record"]
                and snap["record"]["step"] == 2
                and ranks.get("0", {}).get("step") == 3
                and ranks.get("1", {}).get("step") == 2
                and snap["seconds_since_progress"] >= 2
            )
            return snap if ok else None

        snap = wait_for(hung, what="rank 0 at step 3 and rank 1 stuck at step 2")
        assert snap["record"]["total_steps"] == 16  # 512 / (16 x 2 ranks)
        assert snap["ranks"]["1"]["heartbeat_age"] < 10  # alive, just not advancing
        text = get(base + "/metrics").decode()
        assert "ddpjob_progress_step 2.0" in text
        assert 'ddpjob_rank_step{rank="1"} 2.0' in text
        assert "ddpjob_progress_seconds_since_progress" in text
        # SIGTERM frees the hung rank: the gang saves a checkpoint and exits as preempted.
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=RUN)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "hangs before step 3" in out
    assert list((tmp_path / "ckpt").glob("ckpt-*.pt")), out


def test_a_client_that_gave_up_is_no_error_but_a_fault_of_the_server_still_is(tmp_path, capsys):
    """A peer's probe waits 1 s for its answer; a node thawed after a freeze answered
    probes that had long gone, and each left a traceback in the training log (the kind tier)."""
    from ddpjob_trainer.progress_server import make_server

    server = make_server(str(tmp_path / "progress.json"), "127.0.0.1", 0)
    try:
        for exc in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset"), ValueError("a bug")):
            try:
                raise exc
            except Exception:  # noqa: BLE001 - as socketserver calls handle_error: inside the except
                server.handle_error(None, ("10.244.3.2", 54456))
        err = capsys.readouterr().err
        assert "BrokenPipeError" not in err and "ConnectionResetError" not in err
        assert "ValueError: a bug" in err and "10.244.3.2" in err
    finally:
        server.server_close()
