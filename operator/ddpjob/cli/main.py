"""The `ddpjob` command: render, validate, run a job locally, or run the operator."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from ddpjob import render
from ddpjob.api.errors import FieldError
from ddpjob.api.spec import InvalidSpec
from ddpjob.cli import notices
from ddpjob.cli.files import FileError, load_jobs
from ddpjob.text import plural
from ddpjob.version import __version__, image_tags


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
    errors = [e for job in jobs for e in template_policy.check_job(job, allow)]
    if errors:
        raise InvalidSpec(errors)
    for job in jobs:
        print(f"{args.file}: DDPJob {job.namespace}/{job.name} is valid "
              f"({plural(job.nodes, 'node')} x {plural(job.nproc_per_node, 'process')}, {job.backend})")
        notices.say(args.file, job)
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    objects = []
    for job in load_jobs(args.file, args.namespace):
        notices.say(args.file, job)
        objects += render.render(job, restart_count=args.restart_count)
    if args.output == "json":
        # As `kubectl get -o json` prints several objects: one List.
        sys.stdout.write(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2) + "\n")
    else:
        sys.stdout.write(render.to_yaml_stream(objects))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from ddpjob.local import gpus  # keeps `validate`/`render` free of process machinery
    from ddpjob.local.runner import run_job

    jobs = load_jobs(args.file)
    if len(jobs) != 1:
        raise FileError(f"{args.file}: `ddpjob run` takes exactly one DDPJob (found {len(jobs)})")
    if args.cpu:
        blockers = gpus.cpu_blockers(jobs[0])
        if blockers:  # before anything starts: each rank would fail with the same line
            raise InvalidSpec([FieldError(b.path, f"{b.message} (ddpjob run --cpu)") for b in blockers])
    job = gpus.on_cpu(jobs[0]) if args.cpu else jobs[0]
    notices.say(args.file, job)
    available = gpus.visible_gpus()
    problem = gpus.gpu_error(job, available)
    if problem:
        raise FileError(f"{args.file}: {problem}")
    return run_job(job, Path(args.workdir) if args.workdir else None, fresh=args.fresh, gpus=available,
                   hide_gpus=args.cpu, allow_env=args.allow_env)


def cmd_version(args: argparse.Namespace) -> int:
    if args.output == "json":
        print(json.dumps({"version": __version__, "images": image_tags()}, indent=2))
    else:
        print(f"ddpjob {__version__}")
        for build, image in image_tags().items():
            print(f"  {build + ':':14} {image}")
    return 0


def cmd_completion(args: argparse.Namespace) -> int:
    from ddpjob.cli.completion import script

    sys.stdout.write(script(build_parser(), args.shell))
    return 0


def cmd_operator(args: argparse.Namespace) -> int:
    from ddpjob.operator import settings as operator_settings
    from ddpjob.operator.main import run_operator  # needs the `operator` extra (kopf)

    try:
        config = operator_settings.from_env()
    except operator_settings.SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.template_allow is not None:
        config = dataclasses.replace(config, template_allow=_template_allow(args))
    run_operator(namespace=None if args.all_namespaces else args.namespace, standalone=args.standalone,
                 liveness=args.liveness, metrics_port=args.metrics_port, peering=args.peering, settings=config)
    return 0


EXAMPLES = """examples:
  ddpjob validate -f job.yaml           check a file; one line per bad field
  ddpjob render -f job.yaml -o json     the Service and Pods the operator would create
  ddpjob run -f job.yaml                run the job on this machine, no cluster
  cat job.yaml | ddpjob validate -f -   read standard input

  on a cluster (your kubeconfig, like kubectl):
  ddpjob submit job.yaml --wait         check, send, and follow the job to its end
  ddpjob get -o wide                    the jobs: phase, restarts, progress, ETA
  ddpjob describe mnist-cpu             status, progress, last failure, Pods, Events
  ddpjob wait mnist-cpu --for=Succeeded --timeout=30m
  ddpjob logs mnist-cpu --all -f        every Pod's log, prefixed [pod]
  ddpjob delete mnist-cpu

  ddpjob operator --all-namespaces      run the operator (the `operator` extra)
  source <(ddpjob completion bash)      shell completion
"""


def add_file(p: argparse.ArgumentParser) -> None:
    """A DDPJob file as kubectl takes it (-f FILE, -f - for stdin) or positionally."""
    p.add_argument("file", nargs="?", metavar="FILE", help="DDPJob YAML file, or - for standard input")
    p.add_argument("-f", "--filename", metavar="FILE", help="the same as FILE, as kubectl spells it")


def file_commands(sub: argparse._SubParsersAction) -> None:
    """The commands that read a DDPJob file and need no cluster."""
    p = sub.add_parser("validate", help="check a DDPJob file; one line per field error",
                       description="Check a DDPJob file (every document in it) as the API server and the\n"
                                   "operator would: exit 0, or one line per bad field.",
                       epilog="example: ddpjob validate -f manifests/examples/mnist-cpu.yaml",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_file(p)
    p.add_argument("--template-allow", metavar="LIST",
                   help="what the template may ask for, as the operator's templatePolicy.allow "
                        "(comma-separated: privileged,hostPath,hostNamespaces,capabilities)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("render", help="print the Service and Pods the operator would create",
                       description="Print the objects the operator would create for each DDPJob in the file\n"
                                   "(like `helm template`).",
                       epilog="examples:\n  ddpjob render -f job.yaml\n  ddpjob render -f job.yaml -o json "
                              "--restart-count 2 -n team-a", formatter_class=argparse.RawDescriptionHelpFormatter)
    add_file(p)
    p.add_argument("--namespace", "-n", help="override metadata.namespace")
    p.add_argument("--restart-count", type=int, default=0, help="render the Pods of this gang attempt")
    p.add_argument("--output", "-o", choices=("yaml", "json"), default="yaml",
                   help="yaml (a stream of documents, the default) or json (one List)")
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("run", help="run the job on this machine, no cluster needed",
                       description="Run each Pod's trainer container as local processes with the Pod's env\n"
                                   "(rendezvous on 127.0.0.1); restarts and status as the operator decides\n"
                                   "them. Exit 0 only when the job Succeeded.",
                       epilog="examples:\n  ddpjob run -f manifests/examples/mnist-cpu.yaml\n"
                              "  ddpjob run --cpu -f gpu-job.yaml     # a GPU job on a machine without GPUs\n"
                              "  ddpjob run --fresh -f job.yaml       # forget an earlier run's checkpoints",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_file(p)
    p.add_argument("--workdir", help="where checkpoints go (default: ./.ddpjob/<job name>)")
    p.add_argument("--cpu", action="store_true",
                   help="run a GPU job on CPU: no GPUs, gloo, the same world size")
    p.add_argument("--fresh", action="store_true",
                   help="delete the checkpoints and status of an earlier run of this job first")
    p.add_argument("--allow-env", action="store_true",
                   help="let the job's env set names other than the harmless ones (thread counts, NCCL and torch "
                        "switches, DDPJOB_*) for processes on this machine: refused by default, since in a Pod "
                        "they change only the container, here what code runs as you (PATH, LD_PRELOAD, HOME...)")
    p.set_defaults(func=cmd_run)


def operator_command(sub: argparse._SubParsersAction) -> None:
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


def tool_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("version", help="print the version and the images of this release")
    p.add_argument("--output", "-o", choices=("text", "json"), default="text")
    p.set_defaults(func=cmd_version)
    p = sub.add_parser("completion", help="print a shell completion script",
                       description="Print a completion script for bash or zsh.",
                       epilog="examples:\n  source <(ddpjob completion bash)        # this shell\n"
                              "  ddpjob completion bash > ~/.local/share/bash-completion/completions/ddpjob\n"
                              "  source <(ddpjob completion zsh)         # zsh",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shell", choices=("bash", "zsh"))
    p.set_defaults(func=cmd_completion)


def cluster_commands(sub: argparse._SubParsersAction) -> None:
    from ddpjob.cli import cluster  # submit/get/describe/wait/logs/delete/suspend/resume
    cluster.register(sub)


# Each group adds its subcommands; a new group is one function added here.
COMMAND_GROUPS = [file_commands, operator_command, tool_commands, cluster_commands]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ddpjob", description="Run PyTorch DDP training from a DDPJob file.",
                                     epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"ddpjob {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in COMMAND_GROUPS:
        register(sub)
    return parser


def resolve_file(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """-f FILE and the positional FILE are one argument: exactly one of them."""
    if "filename" not in args:
        return
    if args.file and args.filename and args.file != args.filename:
        parser.error(f"two files given ({args.file} and -f {args.filename}); give one")
    args.file = args.filename or args.file
    if not args.file:
        parser.error(f"{args.command}: a DDPJob file is required (FILE, -f FILE, or -f - for standard input)")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    resolve_file(parser, args)
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
