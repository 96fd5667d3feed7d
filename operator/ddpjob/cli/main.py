"""The `ddpjob` command: its parser, built from the command groups, and its entry point.

The groups: a DDPJob file's commands (file_commands.py: validate, render, run), the
operator, the tools (version, completion) and the cluster's (cluster.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from ddpjob.api.job_file import FileError
from ddpjob.api.spec import InvalidSpec
from ddpjob.cli import file_commands
from ddpjob.cli.file_commands import template_allow
from ddpjob.version import __version__, image_tags


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
        config = dataclasses.replace(config, template_allow=template_allow(args))
    run_operator(
        namespace=None if args.all_namespaces else args.namespace,
        standalone=args.standalone,
        liveness=args.liveness,
        metrics_port=args.metrics_port,
        peering=args.peering,
        settings=config,
    )
    return 0


EXAMPLES = """examples:
  ddpjob validate -f job.yaml           check a file; one line per bad field
  ddpjob render -f job.yaml -o json     the Service and Pods the operator would create
  ddpjob run -f job.yaml                run the job on this machine, no cluster
  cat job.yaml | ddpjob validate -f -   read standard input
  ddpjob convert pytorchjob.yaml        a Kubeflow PyTorchJob as a DDPJob

  on a cluster (your kubeconfig, like kubectl):
  ddpjob submit job.yaml --wait         check, send, and follow the job to its end
  ddpjob get -o wide                    the jobs: phase, restarts, progress, ETA
  ddpjob describe mnist-cpu             status, progress, last failure, Pods, Events
  ddpjob wait mnist-cpu --for=Succeeded --timeout=30m
  ddpjob logs mnist-cpu --all -f        every Pod's log, prefixed [pod]
  ddpjob tensorboard mnist-cpu --open   its TensorBoard (spec.tensorboard) in the browser
  ddpjob delete mnist-cpu

  ddpjob operator --all-namespaces      run the operator (the `operator` extra)
  source <(ddpjob completion bash)      shell completion
"""


def operator_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("operator", help="run the operator (needs the `operator` extra)")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--namespace", "-n", help="watch one namespace")
    scope.add_argument("--all-namespaces", "-A", action="store_true", help="watch every namespace (default)")
    peer = p.add_mutually_exclusive_group()
    peer.add_argument("--standalone", action="store_true", help="single replica, no leader election")
    # Gone (leader election on a Lease replaced kopf peering): kept, hidden, so an old
    # command line is refused in one line that says what to set instead (operator/main.py).
    peer.add_argument("--peering", help=argparse.SUPPRESS)
    p.add_argument("--liveness", help="liveness endpoint, e.g. http://0.0.0.0:8080/healthz")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus /metrics on this port")
    p.add_argument(
        "--template-allow",
        metavar="LIST",
        help="what job templates may ask for (default: none of privileged,hostPath,"
        "hostNamespaces,capabilities); also DDPJOB_TEMPLATE_ALLOW",
    )
    p.set_defaults(func=cmd_operator)


def tool_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("version", help="print the version and the images of this release")
    p.add_argument("--output", "-o", choices=("text", "json"), default="text")
    p.set_defaults(func=cmd_version)
    p = sub.add_parser(
        "completion",
        help="print a shell completion script",
        description="Print a completion script for bash or zsh.",
        epilog="examples:\n  source <(ddpjob completion bash)        # this shell\n"
        "  ddpjob completion bash > ~/.local/share/bash-completion/completions/ddpjob\n"
        "  source <(ddpjob completion zsh)         # zsh",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("shell", choices=("bash", "zsh"))
    p.set_defaults(func=cmd_completion)


def cluster_commands(sub: argparse._SubParsersAction) -> None:
    from ddpjob.cli import cluster  # submit/get/describe/wait/logs/delete/suspend/resume

    cluster.register(sub)
    from ddpjob.cli import tensorboard  # `ddpjob tensorboard NAME`

    tensorboard.register(sub)


def plot_command(sub: argparse._SubParsersAction) -> None:
    from ddpjob.cli import plot  # a job's curves as a PNG

    plot.register(sub)


def convert_command(sub: argparse._SubParsersAction) -> None:
    from ddpjob.cli import convert  # a Kubeflow PyTorchJob file as a DDPJob

    convert.register(sub)


# Each group adds its subcommands; a new group is one function added here.
COMMAND_GROUPS = [
    file_commands.register,
    operator_command,
    tool_commands,
    cluster_commands,
    convert_command,
    plot_command,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ddpjob",
        description="Run PyTorch DDP training from a DDPJob file.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
