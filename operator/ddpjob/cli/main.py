"""The `ddpjob` command: render, validate, run a job locally, or run the operator."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from ddpjob import render
from ddpjob.api.spec import DDPJob, InvalidSpec, parse_job


class FileError(Exception):
    pass


def load_documents(path: str) -> list[dict[str, Any]]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as exc:
        raise FileError(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        # One line, like every other error: where, then what.
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise FileError(f"{path}: not valid YAML: {where}{what}") from exc
    if not docs:
        raise FileError(f"{path}: holds no DDPJob")
    return docs


def load_jobs(path: str, namespace: str | None = None) -> list[DDPJob]:
    """Every DDPJob in the file, or InvalidSpec naming each bad field of each document."""
    jobs, errors = [], []
    docs = load_documents(path)
    for i, doc in enumerate(docs):
        if namespace and isinstance(doc, dict):
            doc = {**doc, "metadata": {**(doc.get("metadata") or {}), "namespace": namespace}}
        try:
            jobs.append(parse_job(doc))
        except InvalidSpec as exc:
            prefix = f"document {i + 1}: " if len(docs) > 1 else ""
            errors += [type(e)(prefix + e.path, e.message) for e in exc.errors]
    if errors:
        raise InvalidSpec(errors)
    return jobs


def cmd_validate(args: argparse.Namespace) -> int:
    jobs = load_jobs(args.file)
    for job in jobs:
        print(f"{args.file}: DDPJob {job.namespace}/{job.name} is valid "
              f"({job.nodes} node(s) x {job.nproc_per_node} process(es), {job.backend})")
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    objects = []
    for job in load_jobs(args.file, args.namespace):
        objects += render.render(job, restart_count=args.restart_count)
    sys.stdout.write(render.to_yaml_stream(objects))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from ddpjob.local.runner import run_job  # keeps `validate`/`render` free of process machinery

    jobs = load_jobs(args.file)
    if len(jobs) != 1:
        raise FileError(f"{args.file}: `ddpjob run` takes exactly one DDPJob (found {len(jobs)})")
    return run_job(jobs[0], Path(args.workdir) if args.workdir else None)


def cmd_operator(args: argparse.Namespace) -> int:
    from ddpjob.operator.main import run_operator  # needs the `operator` extra (kopf)

    run_operator(namespace=None if args.all_namespaces else args.namespace, standalone=args.standalone,
                 liveness=args.liveness, metrics_port=args.metrics_port, peering=args.peering)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ddpjob", description="Run PyTorch DDP training from a DDPJob file.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="check a DDPJob file; one line per field error")
    p.add_argument("file", help="DDPJob YAML file, or - for standard input")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("render", help="print the Service and Pods the operator would create")
    p.add_argument("file")
    p.add_argument("--namespace", "-n", help="override metadata.namespace")
    p.add_argument("--restart-count", type=int, default=0, help="render the Pods of this gang attempt")
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("run", help="run the job on this machine, no cluster needed")
    p.add_argument("file")
    p.add_argument("--workdir", help="where checkpoints go (default: ./.ddpjob/<job name>)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("operator", help="run the operator (needs the `operator` extra)")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--namespace", "-n", help="watch one namespace")
    scope.add_argument("--all-namespaces", "-A", action="store_true", help="watch every namespace (default)")
    peer = p.add_mutually_exclusive_group()
    peer.add_argument("--standalone", action="store_true", help="single replica, no leader election")
    peer.add_argument("--peering", help="kopf peering object name for leader election among replicas")
    p.add_argument("--liveness", help="liveness endpoint, e.g. http://0.0.0.0:8080/healthz")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus /metrics on this port")
    p.set_defaults(func=cmd_operator)

    from ddpjob.cli import cluster  # submit/get/describe/wait/logs/delete/suspend/resume
    cluster.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except InvalidSpec as exc:
        for error in exc.errors:
            print(f"{args.file}: {error}", file=sys.stderr)
        return 1
    except FileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
