"""A job's curves: what its trainer logs against the global step, and how it is read back
and drawn. The one home of the metrics log's format and TensorBoard tag names
(`record.py`), its reader (`reader.py`: the metrics log, the event files, a Pod's progress
lines), the one-line drawing (`sparkline.py`) and the PNG (`plot.py`).

Imported by the trainer's writers (ddpjob_trainer's progress.py, event_files.py), the CLI
(`ddpjob plot`, `ddpjob describe`) and `ddpjob run`'s summary: nothing here imports more
than the standard library and the pure modules of `ddpjob/`; TensorBoard (reading event
files) and matplotlib (the PNG) only inside the function that needs them, so the trainer
image needs neither the CLI's dependencies nor matplotlib, and the operator none of it.
"""
