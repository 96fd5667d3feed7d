"""`ddpjob run`'s progress view: the same ProgressState as the operator's, read from files;
a live line on a terminal, plain lines otherwise."""

import io

from ddpjob import progress_record
from ddpjob.job.stall import ProgressState
from ddpjob.local import progress_view
from ddpjob.local.progress_view import AttemptProgress, Display, write_line


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def state(step: int) -> ProgressState:
    return ProgressState(
        0,
        0.0,
        {"step": step, "total_steps": 40, "epoch": 1, "total_epochs": 2, "samples_per_s": 512.0, "loss": 0.25},
        eta_seconds=90,
    )


def test_attempt_progress_reads_pod_0s_record_and_every_pods_heartbeats(tmp_path):
    files = {0: str(tmp_path / "p0" / "progress.json"), 1: str(tmp_path / "p1" / "progress.json")}
    view = AttemptProgress(3, files)
    assert view.state().record is None
    progress_record.write(files[0], step=7, total_steps=40)
    progress_record.write_heartbeat(files[0], 0, rank=0, step=8, step_time=0)
    progress_record.write_heartbeat(files[1], 0, rank=1, step=7, step_time=0)
    s = view.state()
    assert s.restart_count == 3 and s.record["step"] == 7
    assert {r: b["step"] for r, b in s.ranks.items()} == {0: 8, 1: 7}


def test_plain_lines_when_not_a_terminal(monkeypatch):
    out = io.StringIO()
    display = Display(out, "demo")
    display.update(state(10))
    display.update(state(11))  # within PLAIN_EVERY_SECONDS: not repeated
    assert out.getvalue() == ("[ddpjob] demo: epoch 1/2 step 10/40 (25%) 512 samples/s loss 0.2500 ETA 1m30s\n")
    monkeypatch.setattr(progress_view, "PLAIN_EVERY_SECONDS", 0.0)
    display.update(state(12))
    assert out.getvalue().count("\n") == 2 and "step 12/40" in out.getvalue()


def test_one_live_line_on_a_terminal_with_log_lines_above_it():
    out = Terminal()
    display = Display(out, "demo")
    try:
        display.update(state(10))
        write_line(out, "[demo-0] a log line\n")
        display.update(state(20))
    finally:
        display.close()
    text = out.getvalue()
    assert "\n[ddpjob]" not in text  # no plain progress lines
    assert "20/40" in text and "ETA 1m30s" in text and "epoch 1/2" in text  # tqdm's bar and postfix
    assert "[demo-0] a log line\n" in text
    assert text.index("10/40") < text.index("[demo-0] a log line") < text.index("20/40")
