"""ddpjob-launch's share of the event files: a program other than ddpjob-train that writes
the progress record (`ddpjob.progress_record`, the README's recipe) gets at least its
loss curve (and samples/s) in TensorBoard, with no TensorBoard code of its own.

A thread reads the record where the program writes it, every `POLL_SECONDS`, and hands
each new step's numbers to the same writer ddpjob-train uses (event_files.py): a sample of
the curve (a step that lasts less than a poll may be missed), and the last record is read
once more when the program ends. Each epoch's last record comes whole, from the record's
epoch journal (`progress_record.read_epochs`): no epoch is missed, however short. Its
first step says where this attempt's curve takes over from earlier attempts'.
ddpjob-train writes its own, complete, event files, so its records are not followed.
"""

from __future__ import annotations

import os
import threading

from ddpjob import contract, progress_record
from ddpjob.curves.record import POSITION

from .event_files import EventWriter

POLL_SECONDS = 1.0  # the heartbeats' own interval: as fresh as anything else the launcher serves


class RecordFollower:
    def __init__(self, progress_file: str, writer: EventWriter, interval: float = POLL_SECONDS):
        self.path, self.writer, self.interval = progress_file, writer, interval
        self.last_step: int | None = None
        self.epochs_offset = 0  # how far the epoch journal has been read
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll(self) -> None:
        """Read the epochs' records not read yet, then the record; a step not seen before
        becomes a point."""
        ended, self.epochs_offset = progress_record.read_epochs(self.path, self.epochs_offset)
        for record in [*ended, progress_record.read(self.path)]:
            self._point(record)

    def _point(self, record: dict | None) -> None:
        if record is None or (self.last_step is not None and record["step"] <= self.last_step):
            return
        step = record["step"]
        if self.last_step is None:
            self.writer.add({"event": POSITION, "step": max(step - 1, 0)})
        self.last_step = step
        numbers = {k: record[k] for k in ("loss", "samples_per_s") if k in record}
        self.writer.add({"event": "step", "step": step, **numbers})

    def start(self) -> RecordFollower:
        self._thread = threading.Thread(target=self._run, name="ddpjob-record-events", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.poll()  # the program's last record
        self.writer.close()


def follow(cmd: list[str], env=None, say=None) -> RecordFollower | None:
    """Follow the program's progress records into event files, when it is not ddpjob-train
    and there is a record to read and a directory to write to."""
    env = os.environ if env is None else env
    if cmd[:1] == ["ddpjob-train"] or cmd[:2] == ["-m", "ddpjob_trainer.train"]:
        return None
    progress_file = env.get(contract.PROGRESS_FILE)
    if not progress_file:
        return None
    restart = env.get(contract.RESTART_COUNT) or "0"
    writer = EventWriter.open(env.get(contract.CHECKPOINT_DIR) or None, int(restart) if restart.isdigit() else 0, say)
    return RecordFollower(progress_file, writer).start() if writer is not None else None
