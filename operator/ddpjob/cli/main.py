"""The `ddpjob` command: render, validate, run a job locally, or run the operator."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ddpjob import render
from ddpjob.api.spec import DDPJob, InvalidSpec, parse_job
from ddpjob.cli.files import FileError, load_documents


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


def _template_allow(args: argparse.Namespace) -> frozenset[str]:
    from ddpjob.api import template_policy

    try:
        return template_policy.parse_allowances(getattr(args, "template_allow", None))
    except ValueError as exc:
        raise FileError(f"--template-allow: {exc}") from None


def cmd_validate(args: argparse.Namespace) -> int:
    from ddpjob.api import template_policy

    jobs = load_jobs(args.file)
    allow = _template_allow(args)
    errors = [e for job in jobs for e in template_policy.check(job.template, allow)]
    if errors:
        raise InvalidSpec(errors)
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

    from ddpjob.api import template_policy

    if args.template_allow is not None:
        os.environ[template_policy.ENV] = ",".join(sorted(_template_allow(args)))
    run_operator(namespace=None if args.all_namespaces else args.namespace, standalone=args.standalone,
                 liveness=args.liveness, metrics_port=args.metrics_port, peering=args.peering)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ddpjob", description="Run PyTorch DDP training from a DDPJob file.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="check a DDPJob file; one line per field error")
    p.add_argument("file", help="DDPJob YAML file, or - for standard input")
    p.add_argument("--template-allow", metavar="LIST",
                   help="what the template may ask for, as the operator's templatePolicy.allow "
                        "(comma-separated: privileged,hostPath,hostNamespaces,capabilities)")
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
    p.add_argument("--template-allow", metavar="LIST",
                   help="what job templates may ask for (default: none of privileged,hostPath,"
                        "hostNamespaces,capabilities); also DDPJOB_TEMPLATE_ALLOW")
    p.set_defaults(func=cmd_operator)
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
