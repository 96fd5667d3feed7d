"""`ddpjob validate|render|run`: the commands that read a DDPJob file and need no cluster.

`run` loads the local runner only when it runs, so `validate` and `render` stay free of
process machinery.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ddpjob import render
from ddpjob.api import notices
from ddpjob.api.errors import FieldError
from ddpjob.api.job_file import FileError, load_jobs
from ddpjob.api.spec import InvalidSpec
from ddpjob.render.tensorboard import render as render_tensorboard
from ddpjob.text import plural


def template_allow(args: argparse.Namespace) -> frozenset[str]:
    from ddpjob.api import template_policy

    try:
        return template_policy.parse_allowances(getattr(args, "template_allow", None))
    except ValueError as exc:
        raise FileError(f"--template-allow: {exc}") from None


def cmd_validate(args: argparse.Namespace) -> int:
    from ddpjob.api import template_policy

    jobs = load_jobs(args.file)
    allow = template_allow(args)
    errors = [e for job in jobs for e in template_policy.check_job(job, allow)]
    if errors:
        raise InvalidSpec(errors)
    for job in jobs:
        print(
            f"{args.file}: DDPJob {job.namespace}/{job.name} is valid "
            f"({plural(job.nodes, 'node')} x {plural(job.nproc_per_node, 'process')}, {job.backend})"
        )
        notices.say(args.file, job)
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    objects = []
    for job in load_jobs(args.file, args.namespace):
        notices.say(args.file, job)
        objects += render.render(job, restart_count=args.restart_count)
        objects += render_tensorboard(job)  # spec.tensorboard: its Service and Deployment
    if args.output == "json":
        # As `kubectl get -o json` prints several objects: one List.
        sys.stdout.write(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2) + "\n")
    else:
        sys.stdout.write(render.to_yaml_stream(objects))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from ddpjob.local import gpus, program  # keeps `validate`/`render` free of process machinery
    from ddpjob.local.runner import run_job

    jobs = load_jobs(args.file)
    if len(jobs) != 1:
        raise FileError(f"{args.file}: `ddpjob run` takes exactly one DDPJob (found {len(jobs)})")
    if args.cpu:
        blockers = gpus.cpu_blockers(jobs[0])
        if blockers:  # before anything starts: each rank would fail with the same line
            raise InvalidSpec([FieldError(b.path, f"{b.message} (ddpjob run --cpu)") for b in blockers])
    job = gpus.on_cpu(jobs[0]) if args.cpu else jobs[0]
    missing = program.missing_script(job, args.file)
    if missing:  # before anything starts: every process would fail with it
        raise InvalidSpec([missing])
    notices.say(args.file, job)
    available = gpus.visible_gpus()
    problem = gpus.gpu_error(job, available)
    if problem:
        raise FileError(f"{args.file}: {problem}")
    return run_job(
        job,
        Path(args.workdir) if args.workdir else None,
        fresh=args.fresh,
        gpus=available,
        hide_gpus=args.cpu,
        allow_env=args.allow_env,
        tensorboard=args.tensorboard,
        output=args.output,
    )


def add_file(p: argparse.ArgumentParser) -> None:
    """A DDPJob file as kubectl takes it (-f FILE, -f - for stdin) or positionally."""
    p.add_argument("file", nargs="?", metavar="FILE", help="DDPJob YAML file, or - for standard input")
    p.add_argument("-f", "--filename", metavar="FILE", help="the same as FILE, as kubectl spells it")


def register(sub: argparse._SubParsersAction) -> None:
    """The commands that read a DDPJob file and need no cluster."""
    p = sub.add_parser(
        "validate",
        help="check a DDPJob file; one line per field error",
        description="Check a DDPJob file (every document in it) as the API server and the\n"
        "operator would: exit 0, or one line per bad field.",
        epilog="example: ddpjob validate -f manifests/examples/mnist-cpu.yaml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_file(p)
    p.add_argument(
        "--template-allow",
        metavar="LIST",
        help="what the template may ask for, as the operator's templatePolicy.allow "
        "(comma-separated: privileged,hostPath,hostNamespaces,capabilities)",
    )
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "render",
        help="print the Service and Pods the operator would create",
        description="Print the objects the operator would create for each DDPJob in the file\n(like `helm template`).",
        epilog="examples:\n  ddpjob render -f job.yaml\n  ddpjob render -f job.yaml -o json "
        "--restart-count 2 -n team-a",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_file(p)
    p.add_argument("--namespace", "-n", help="override metadata.namespace")
    p.add_argument("--restart-count", type=int, default=0, help="render the Pods of this gang attempt")
    p.add_argument(
        "--output",
        "-o",
        choices=("yaml", "json"),
        default="yaml",
        help="yaml (a stream of documents, the default) or json (one List)",
    )
    p.set_defaults(func=cmd_render)

    p = sub.add_parser(
        "run",
        help="run the job on this machine, no cluster needed",
        description="Run each Pod's trainer container as local processes with the Pod's env\n"
        "(rendezvous on 127.0.0.1); restarts and status as the operator decides\n"
        "them. Exit 0 only when the job Succeeded.",
        epilog="examples:\n  ddpjob run -f manifests/examples/mnist-cpu.yaml\n"
        "  ddpjob run --cpu -f gpu-job.yaml     # a GPU job on a machine without GPUs\n"
        "  ddpjob run --fresh -f job.yaml       # forget an earlier run's checkpoints\n"
        "  ddpjob run --tensorboard -f job.yaml # its curves in TensorBoard, until Ctrl-C",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_file(p)
    p.add_argument("--workdir", help="where checkpoints go (default: ./.ddpjob/<job name>)")
    p.add_argument("--cpu", action="store_true", help="run a GPU job on CPU: no GPUs, gloo, the same world size")
    p.add_argument(
        "--fresh", action="store_true", help="delete the checkpoints and status of an earlier run of this job first"
    )
    p.add_argument(
        "--allow-env",
        action="store_true",
        help="let the job's env set names other than the harmless ones (thread counts, NCCL and torch "
        "switches, DDPJOB_*) for processes on this machine: refused by default, since in a Pod "
        "they change only the container, here what code runs as you (PATH, LD_PRELOAD, HOME...)",
    )
    p.add_argument(
        "--tensorboard",
        action="store_true",
        help="serve the job's curves (./.ddpjob/<name>/tensorboard, a run per folder) with TensorBoard on a "
        "loopback port from its start until Ctrl-C, the job's end included, and print the URL",
    )
    p.add_argument(
        "-o",
        "--output",
        choices=("summary", "yaml"),
        default="summary",
        help="how the run ends: a line of summary (default), or the final status as a YAML document",
    )
    p.set_defaults(func=cmd_run)
