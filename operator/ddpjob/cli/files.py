"""The DDPJob file reader's names where `ddpjob convert` and `validate/render/run`
import them; the reader itself is ddpjob/api/job_file.py (the Python client reads files
too, and it does not import the command)."""

from ddpjob.api.job_file import FileError, load_documents, load_jobs

__all__ = ["FileError", "load_documents", "load_jobs"]
