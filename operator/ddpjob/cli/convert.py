"""`ddpjob convert pytorchjob.yaml`: a Kubeflow PyTorchJob file as a DDPJob (cli/pytorchjob.py
maps the fields; docs/pytorchjob.md is the table).

The DDPJob is printed as YAML on stdout, checked as `ddpjob validate` checks a file; a
field dropped because ddpjob sets it itself, or a default that differs, is one `note:`
line on stderr; a field with no exact equivalent, or one that is not what a PyTorchJob
holds there (a replica count of 'abc'), is one error line naming it, and nothing is
printed (exit 1).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from ddpjob.api.job_file import load_documents
from ddpjob.api.spec import InvalidSpec, parse_job
from ddpjob.cli import pytorchjob


def register(sub: Any) -> None:
    p = sub.add_parser(
        "convert",
        help="print a Kubeflow PyTorchJob file as a DDPJob",
        description="Print a Kubeflow PyTorchJob (kubeflow.org/v1) as a DDPJob: Master and Workers become "
        "nodes, nprocPerNode stays, elasticPolicy becomes elastic. A field with no exact equivalent is an "
        "error naming it.",
        epilog="examples:\n  ddpjob convert pytorchjob.yaml > job.yaml\n"
        "  ddpjob convert pytorchjob.yaml --gang volcano | ddpjob submit -f -",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", nargs="?", help="PyTorchJob YAML file, or - for standard input")
    p.add_argument("-f", "--filename", help="the same as FILE (like kubectl)")
    p.add_argument(
        "--gang",
        choices=pytorchjob.GANGS,
        default="none",
        help="the gang scheduler the training operator used (its --gang-scheduler-name), for runPolicy."
        "schedulingPolicy (default: none)",
    )
    p.set_defaults(func=cmd_convert)


def cmd_convert(args: argparse.Namespace) -> int:
    out, errors, notes = [], [], []
    docs = load_documents(args.file)
    for i, doc in enumerate(docs):
        prefix = f"document {i + 1}: " if len(docs) > 1 else ""
        try:
            job, found = pytorchjob.convert(doc, args.gang)
        except (TypeError, ValueError, AttributeError, KeyError, RecursionError) as e:
            # A shape no check above foresaw: one line, never a traceback.
            errors.append(f"{args.file}: {prefix}cannot be read as a PyTorchJob: {type(e).__name__}: {e}"[:300])
            continue
        errors += [f"{args.file}: {prefix}{e}" for e in found.errors]
        notes += [f"{args.file}: {prefix}note: {note}" for note in found.notes]
        if not found.errors:
            try:
                parse_job(job)  # what `ddpjob validate` would say of the result
            except InvalidSpec as exc:
                errors += [f"{args.file}: {prefix}the DDPJob it makes: {e}" for e in exc.errors]
            out.append(job)
    for line in errors or notes:  # a refused file's notes would only hide its errors
        print(line, file=sys.stderr)
    if errors:
        return 1
    sys.stdout.write(yaml.safe_dump_all(out, sort_keys=False))
    return 0
