"""The `ddpjob` command line."""

from ddpjob.cli.main import main

__all__ = ["main"]
