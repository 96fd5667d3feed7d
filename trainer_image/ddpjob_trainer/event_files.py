"""TensorBoard event files: the job's metrics as curves against the global step.

Users: `progress.Progress` (ddpjob-train: every metrics.jsonl record of global rank 0 comes
here too) and `record_events.py` (ddpjob-launch: a user's program's progress records, its
loss curve at least). Written with TensorBoard's own event file writer: `add` builds one
protobuf and queues it, a thread of TensorBoard's writes the file (the cost per record is
measured by benchmarks/event_files.py, against a step). What a record holds, its tags and
the folder are the curves' format (`ddpjob.curves.record`), which the readers share.

Where: `$DDPJOB_TENSORBOARD_DIR` (only `ddpjob run` sets it: `./.ddpjob/<name>/tensorboard/
<run>`), else `<checkpoint dir>/tensorboard/<job name>` (DDPJOB_NAME, which every Pod has:
the job's TensorBoard, which reads `<checkpoint dir>/tensorboard`, shows it as a run named
after the job, and two jobs that share a volume as two runs), `<checkpoint dir>/tensorboard`
without a job name; nowhere without a checkpoint directory.

One continuous curve through restarts, resumes and resizes: each writer is a new file in
the same directory, and the first thing it writes is TensorBoard's own restart mark
(`SessionLog START`) at the step after the one training goes on from, so readers drop
whatever an earlier attempt wrote past that step (steps after the checkpoint it resumed
from, trained again now): no step is drawn twice and none is missing. Each start,
resume, resize and stop is marked at its step: `job/world_size` and `job/restarts` as
scalars, and a line of text in `job/events`.
"""

from __future__ import annotations

import os
import re
import sys
import time
from typing import Any

from ddpjob import contract
from ddpjob.curves.record import POSITIONS, SUBDIR, TAGS

FLUSH_SECONDS = 5  # how soon a running job's points reach a TensorBoard that shows them
MARKERS = ("start", "resume", "resize", "preempted")
_JOB_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def directory(checkpoint_dir: str | None, env: Any = None) -> str | None:
    """Where this job's event files go (None: nowhere)."""
    env = os.environ if env is None else env
    given = env.get(contract.TENSORBOARD_DIR)
    if given:
        return str(given)
    if not checkpoint_dir:
        return None
    name = str(env.get(contract.JOB_NAME) or "")
    # A job's name is a DNS subdomain: anything else set by hand is no folder name.
    return os.path.join(checkpoint_dir, SUBDIR, *([name] if _JOB_NAME.fullmatch(name) else []))


def marker_text(record: dict) -> str:
    """One line for `job/events`: what happened at this step."""
    event = record.get("event")
    if event == "start":
        return f"start: attempt {record.get('restart', 0)}, world size {record.get('world_size', '?')}"
    if event == "resume":
        return f"resumed from step {record.get('step')} ({record.get('checkpoint', 'checkpoint')})"
    if event == "resize":
        return f"resized in place: {record.get('nodes', '?')} nodes, world size {record.get('world_size', '?')}"
    return f"{event} at step {record.get('step')}"


class EventWriter:
    """Rank 0's event files. Opened at the first step known (where training goes on
    from); a marker seen before that waits for it. Never raises into training: a writer
    that fails says so once and stops writing."""

    def __init__(self, logdir: str, restart: int = 0, say=None):
        self.logdir, self.restart = logdir, restart
        self.say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self.writer: Any = None
        self.pending: list[dict] = []
        self.broken = False

    @classmethod
    def open(cls, checkpoint_dir: str | None, restart: int = 0, say=None) -> EventWriter | None:
        """A writer for this job, or None when there is nowhere to write or no TensorBoard."""
        logdir = directory(checkpoint_dir)
        if logdir is None:
            return None
        try:
            import tensorboard.summary.writer.event_file_writer  # noqa: F401 - only whether it is there
        except ImportError:
            (say or print)("warning: tensorboard is not installed: no event files (pip install tensorboard)")
            return None
        return cls(logdir, restart, say)

    def add(self, record: dict) -> None:
        """One metrics.jsonl record ({"event", "step", fields...})."""
        event, step = record.get("event"), record.get("step")
        if self.broken:
            return
        if self.writer is None:
            if event in POSITIONS and isinstance(step, int):
                self._open(step)
            elif event in MARKERS:  # a start: its step is known once the position is
                self.pending.append(record)
                return
        tags = TAGS.get(str(event), {})
        if not isinstance(step, int) or self.writer is None:
            return
        values = [(tag, float(v)) for key, tag in tags.items() if isinstance(v := record.get(key), (int, float))]
        if event in MARKERS:
            self._marker(record, step)
        if values:
            self._write(step, values)

    def _open(self, step: int) -> None:
        try:
            from tensorboard.compat.proto import event_pb2
            from tensorboard.summary.writer.event_file_writer import EventFileWriter

            os.makedirs(self.logdir, exist_ok=True)
            self.writer = EventFileWriter(self.logdir, flush_secs=FLUSH_SECONDS)
            # Readers drop what earlier writers put at this step and after (trained again now).
            start = event_pb2.SessionLog(status=event_pb2.SessionLog.START)
            self.writer.add_event(event_pb2.Event(wall_time=time.time(), step=step + 1, session_log=start))
        except Exception as e:  # noqa: BLE001 - the curves are worth less than the training
            self._fail(e)
            return
        pending, self.pending = self.pending, []
        for record in pending:
            self._marker(record, step)

    def _marker(self, record: dict, step: int) -> None:
        values = [("job/restarts", float(record.get("restart", self.restart)))]
        if isinstance(record.get("world_size"), int):
            values.append(("job/world_size", float(record["world_size"])))
        self._write(step, values, text=marker_text(record))

    def _write(self, step: int, values: list[tuple[str, float]], text: str | None = None) -> None:
        if self.writer is None:
            return
        try:
            from tensorboard.compat.proto import event_pb2, summary_pb2

            summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in values])
            if text is not None:
                summary.value.append(_text_value("job/events", text))
            self.writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))
        except Exception as e:  # noqa: BLE001 - as in _open
            self._fail(e)

    def _fail(self, e: Exception) -> None:
        self.broken = True
        self.say(f"warning: TensorBoard event files in {self.logdir} stopped: {e}")
        self.close()

    def close(self) -> None:
        writer, self.writer = self.writer, None
        if writer is not None:
            try:
                writer.close()
            except Exception as e:  # noqa: BLE001 - a full disk at the end: the job's result stands
                self.say(f"warning: closing the event files in {self.logdir}: {e}")


def _text_value(tag: str, text: str):
    """A text summary as TensorBoard's text plugin reads it (a string tensor)."""
    from tensorboard.compat.proto import summary_pb2, tensor_pb2, tensor_shape_pb2
    from tensorboard.plugins.text.metadata import create_summary_metadata

    tensor = tensor_pb2.TensorProto(
        dtype=7,  # DT_STRING
        string_val=[text.encode()],
        tensor_shape=tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1)]),
    )
    return summary_pb2.Summary.Value(tag=tag, metadata=create_summary_metadata("", ""), tensor=tensor)
