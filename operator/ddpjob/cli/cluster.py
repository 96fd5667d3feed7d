"""`ddpjob submit|get|describe|wait|logs|delete|suspend|resume`: DDPJobs on a cluster.

A thin argparse layer over the cluster layer (ddpjob/cluster/: the user's kubeconfig,
jobs, Pods, logs, Events, on the official `kubernetes` client; no kopf), which the Python
client shares. Every failure is one line on stderr and a non-zero exit status, never a
traceback. `wait` and `submit --wait` follow a job's phase with job_phase.py.

    ddpjob submit job.yaml [--wait]      validate, then server-side apply; prints the name
    ddpjob get [NAME] [-o wide|yaml|json] the server's table (the CRD's printer columns)
    ddpjob describe NAME                 spec, status, conditions, last failure, Events, Pods
    ddpjob wait NAME --for=Succeeded     exit 0: reached; 1: ended otherwise; 2: timed out
    ddpjob logs NAME [--rank K | --node N | --all] [-f]
    ddpjob delete|suspend|resume NAME...
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import yaml

from ddpjob import text
from ddpjob.api import names
from ddpjob.cli import output
from ddpjob.cli.job_phase import follow
from ddpjob.cluster import connection, jobs
from ddpjob.cluster.connection import ClusterError, Connection
from ddpjob.cluster.jobs import TERMINAL, get_job
from ddpjob.cluster.pods import job_pods

# The largest --timeout accepted (a week): every wait has a bound.
MAX_TIMEOUT = 7 * 24 * 3600.0


def add_connection_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context to use (default: the current context)")
    p.add_argument("-n", "--namespace", help="namespace (default: the context's namespace, else default)")


def register(sub: Any) -> None:
    """Add the cluster subcommands to `ddpjob`'s subparsers (called by cli/main.py)."""
    p = sub.add_parser("submit", help="validate a DDPJob file and apply it to the cluster")
    p.add_argument("file", nargs="?", help="DDPJob YAML file, or - for standard input")
    p.add_argument("-f", "--filename", help="the same as FILE (like kubectl)")
    p.add_argument("--wait", action="store_true", help="follow phase changes; exit with the job's result")
    p.add_argument("--timeout", type=duration, default=None, help="with --wait: give up after this long (e.g. 30m)")
    p.add_argument("--force-conflicts", action="store_true", help="take over fields another manager owns")
    p.add_argument(
        "--template-allow",
        default=None,
        metavar="ITEMS",
        help="check the template as an operator with these templatePolicy.allow items would "
        "(comma-separated; default: none, as the chart's default)",
    )
    p.add_argument(
        "--skip-policy-check",
        action="store_true",
        help="send without the template policy check (for an admin whose operator allows more)",
    )
    cluster_command(p, cmd_submit)

    p = sub.add_parser("get", help="list DDPJobs (a table like kubectl), or one")
    p.add_argument("name", nargs="?")
    p.add_argument(
        "-o",
        "--output",
        choices=("table", "wide", "yaml", "json"),
        default="table",
        help="table (default), wide (every column), yaml or json (without managedFields, as kubectl)",
    )
    p.add_argument("--show-managed-fields", action="store_true", help="with -o yaml|json: keep metadata.managedFields")
    cluster_command(p, cmd_get)

    p = sub.add_parser("describe", help="a DDPJob's spec, status, conditions, Events and Pods")
    p.add_argument("name")
    cluster_command(p, cmd_describe)

    p = sub.add_parser("wait", help="wait until a DDPJob reaches a phase (exit 0), ends otherwise (1) or times out (2)")
    p.add_argument("name")
    p.add_argument("--for", dest="phase", required=True, choices=("Succeeded", "Failed", "Running", "Suspended"))
    p.add_argument("--timeout", type=duration, default=None, help="e.g. 90s, 10m, 2h (default: no limit)")
    cluster_command(p, cmd_wait)

    p = sub.add_parser("logs", help="the trainer logs of a DDPJob's Pods, prefixed [pod]")
    p.add_argument("name")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--rank", type=int, help="the Pod that runs this global rank")
    which.add_argument("--node", type=int, help="the Pod of this node rank (default 0)")
    which.add_argument("--all", action="store_true", help="every Pod")
    p.add_argument("-f", "--follow", action="store_true", help="stream until the Pods' containers end")
    p.add_argument("--tail", type=int, default=None, help="only the last N lines of each Pod")
    cluster_command(p, cmd_logs)

    for verb, summary in (
        ("delete", "delete DDPJobs (their Pods and Services go with them)"),
        ("suspend", "suspend DDPJobs: their Pods are deleted, the jobs stay"),
        ("resume", "resume suspended DDPJobs"),
    ):
        p = sub.add_parser(verb, help=summary)
        p.add_argument("names", nargs="+", metavar="NAME", help="one or more DDPJobs, as kubectl takes them")
        cluster_command(p, cmd_simple)


def cluster_command(p: argparse.ArgumentParser, func: Callable[[argparse.Namespace, Connection], int]) -> None:
    add_connection_args(p)
    p.set_defaults(func=lambda args: run(args, func))


def run(args: argparse.Namespace, func: Callable[[argparse.Namespace, Connection], int]) -> int:
    conn = None
    try:
        conn = connection.connect(args.kubeconfig, args.context, args.namespace)
        return func(args, conn)
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    # Any failure of the kubernetes client, urllib3 or the OS: one line, no traceback.
    except Exception as exc:  # noqa: BLE001 - the command's last word: whatever failed is one line
        what = f"ddpjob {getattr(args, 'name', '') or ''}".strip()
        print(f"error: {connection.explain(exc, conn, what)}", file=sys.stderr)
        return 1


def duration(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        value = float(text[:-1]) * units[text[-1]] if text[-1] in units else float(text)
    except (ValueError, IndexError):
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90s, 10m, 2h)") from None
    if not 0 < value <= MAX_TIMEOUT:
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most {MAX_TIMEOUT / 3600:.0f}h (got {text})")
    return value


# ---- commands ------------------------------------------------------------------------


def cmd_submit(args: argparse.Namespace, conn: Connection) -> int:
    from ddpjob.api import template_policy
    from ddpjob.api.job_file import load_jobs
    from ddpjob.api.spec import InvalidSpec

    try:
        parsed = load_jobs(args.file, conn.namespace)  # every field checked before anything is sent
        # The same policy as `ddpjob validate` and the operator: a job the operator would
        # refuse is refused here, before it is stored and fails.
        allow = template_policy.parse_allowances(args.template_allow)
        errors = [] if args.skip_policy_check else [e for job in parsed for e in template_policy.check_job(job, allow)]
        if errors:
            raise InvalidSpec(errors)
    except ValueError as exc:
        if isinstance(exc, InvalidSpec):
            raise ClusterError("\n".join(f"{args.file}: {e}" for e in exc.errors)) from None
        raise ClusterError(f"--template-allow: {exc}") from None
    from ddpjob.api import notices

    for job in parsed:
        notices.say(args.file, job)
    from ddpjob.api.job_file import load_documents
    from ddpjob.cli import resubmit

    docs = [{**d, "metadata": {**d["metadata"], "namespace": conn.namespace}} for d in load_documents(args.file)]
    stored = {d["metadata"]["name"]: resubmit.existing(conn, d["metadata"]["name"]) for d in docs}
    for doc in docs:  # before anything is sent
        if (before := stored[doc["metadata"]["name"]]) is not None:
            resubmit.refuse_immutable_changes(args.file, before, doc)
    submitted = []
    for doc in docs:
        name = doc["metadata"]["name"]
        try:
            jobs.apply_job(conn, doc, force=bool(args.force_conflicts))
        except ClusterError as exc:
            conflict = resubmit.explain_conflict(exc, name)
            if conflict is None:
                raise
            raise conflict from None
        print(f"ddpjob.{names.GROUP}/{name}")
        note = resubmit.finished_note(name, stored[name])
        if note:
            print(note, file=sys.stderr)
        submitted.append(name)
    if not args.wait:
        return 0
    results = [follow(conn, name, TERMINAL, args.timeout, report=True) for name in submitted]
    return max(results)


def cmd_wait(args: argparse.Namespace, conn: Connection) -> int:
    return follow(conn, args.name, (args.phase,), args.timeout, report=False)


def cmd_get(args: argparse.Namespace, conn: Connection) -> int:
    if args.output in ("yaml", "json"):
        obj = get_job(conn, args.name) if args.name else jobs.list_jobs(conn)
        if not args.show_managed_fields:
            obj = output.without_managed_fields(obj)
        print(
            json.dumps(obj, indent=2) if args.output == "json" else yaml.safe_dump(obj, sort_keys=False),
            end="\n" if args.output == "json" else "",
        )
        return 0
    table = jobs.job_table(conn, args.name)
    if table.get("kind") != "Table":
        raise ClusterError("the API server did not answer with a Table; use -o yaml")
    if not table.get("rows"):
        print(f"No DDPJobs in namespace {conn.namespace}.", file=sys.stderr)
        return 0
    print(output.format_table(table, wide=args.output == "wide"))
    return 0


def cmd_describe(args: argparse.Namespace, conn: Connection) -> int:
    from ddpjob.cli.describe import describe
    from ddpjob.cli.logs import loss_curve
    from ddpjob.cluster.events import job_events

    job, pods = get_job(conn, args.name), job_pods(conn, args.name)
    events = job_events(conn, args.name)
    # Whatever wrote the status or the Events, nothing in them moves this terminal's cursor.
    print(text.clean(describe(job, pods, events, datetime.now(UTC), loss_curve(conn, pods)), limit=1 << 20))
    return 0


def cmd_logs(args: argparse.Namespace, conn: Connection) -> int:
    from ddpjob.cli.logs import show_logs

    return show_logs(conn, get_job(conn, args.name), job_pods(conn, args.name), args)


def cmd_simple(args: argparse.Namespace, conn: Connection) -> int:
    """delete, suspend, resume: each name in turn; one that fails is one line, and the
    others are still done (as kubectl does); exit 1 if any failed."""
    code = 0
    for name in args.names:
        try:
            print(f"ddpjob.{names.GROUP}/{name} {simple_verb(args.command, conn, name)}", flush=True)
        except ClusterError as exc:
            print(f"error: {exc}", file=sys.stderr)
            code = 1
        except Exception as exc:  # noqa: BLE001 - anything else for this name: one line, then the next name
            print(f"error: {connection.explain(exc, conn, f'ddpjob {name}')}", file=sys.stderr)
            code = 1
    return code


def simple_verb(command: str, conn: Connection, name: str) -> str:
    if command == "delete":
        jobs.delete_job(conn, name)
        return "deleted"
    suspend = command == "suspend"
    jobs.set_suspended(conn, name, suspend)
    return "suspended" if suspend else "resumed"
