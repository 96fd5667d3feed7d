"""Who may import whom: each package serves one audience (docs/design.md, "Packages").

Read statically from the source (every `import` and `from ... import`, at any depth), so a
boundary holds even for code paths no other test runs. An import inside a function is
"lazy": the CLI uses that to keep `validate`/`render` free of the local runner and kopf.
"""

from __future__ import annotations

import ast
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCES = {
    "ddpjob": ROOT / "operator" / "ddpjob",
    "ddpjob_devcluster": ROOT / "operator" / "ddpjob_devcluster",
    "ddpjob_trainer": ROOT / "trainer_image" / "ddpjob_trainer",
}

# Third-party packages that only some audiences may use.
KUBE = {"kopf", "kubernetes", "kubernetes_asyncio", "aiohttp", "urllib3", "prometheus_client"}
TORCH = {"torch", "torchvision", "tqdm"}
PROCESSES = {"subprocess", "multiprocessing"}

# package -> (first-party packages it may import at module level, lazily, forbidden third-party)
# A first-party name allows itself and everything below it. "ddpjob.<pure>" is any module
# directly in ddpjob/ (contract, and the like): pure, shared by every side.
PURE = "ddpjob.<pure>"
RULES: dict[str, tuple[set[str], set[str], set[str]]] = {
    PURE: ({PURE}, set(), KUBE | TORCH | PROCESSES | {"jinja2", "yaml"}),
    # A job's curves (the metrics log's format and tags, its reader, the sparkline, the
    # PNG): written by the trainer, read by the CLI and `ddpjob run`. TensorBoard and
    # matplotlib only inside the functions that read event files or draw.
    "ddpjob.curves": ({PURE, "ddpjob.curves"}, set(), KUBE | TORCH | PROCESSES | {"jinja2", "yaml"}),
    "ddpjob.api": ({PURE, "ddpjob.api", "ddpjob.curves"}, set(), KUBE | TORCH | PROCESSES | {"jinja2"}),
    "ddpjob.render": ({PURE, "ddpjob.api", "ddpjob.render"}, set(), KUBE | TORCH | PROCESSES),
    "ddpjob.job": ({PURE, "ddpjob.api", "ddpjob.job"}, set(), KUBE | TORCH | PROCESSES | {"jinja2"}),
    # tqdm: `ddpjob run`'s optional live progress line (imported lazily, plain lines without it).
    "ddpjob.local": (
        {PURE, "ddpjob.api", "ddpjob.curves", "ddpjob.render", "ddpjob.job", "ddpjob.local"},
        set(),
        KUBE | TORCH - {"tqdm"},
    ),
    "ddpjob.operator": ({PURE, "ddpjob.api", "ddpjob.render", "ddpjob.job", "ddpjob.operator"}, set(), TORCH),
    # Talking to a cluster (connection, jobs, Pods, logs, Events, kubectl): under the CLI and the client.
    "ddpjob.cluster": ({PURE, "ddpjob.api", "ddpjob.cluster"}, set(), TORCH | PROCESSES | {"kopf"}),
    "ddpjob.cli": (
        {PURE, "ddpjob.api", "ddpjob.curves", "ddpjob.render", "ddpjob.job", "ddpjob.cluster", "ddpjob.cli"},
        {"ddpjob.local", "ddpjob.operator"},
        TORCH | {"kopf"},
    ),
    # The Python API: on the cluster layer the CLI stands on, never on the CLI itself.
    # Its local backend runs `ddpjob run`'s runner (local/background.py), imported when first used.
    "ddpjob.client": (
        {PURE, "ddpjob.api", "ddpjob.cluster", "ddpjob.client"},
        {"ddpjob.local"},
        TORCH | PROCESSES | {"kopf"},
    ),
    # prometheus_client: ddpjob-launch serves the progress contract's /metrics.
    "ddpjob_trainer": ({PURE, "ddpjob.curves", "ddpjob_trainer"}, set(), KUBE - {"prometheus_client"} | {"jinja2"}),
    "ddpjob_devcluster": ({PURE, "ddpjob", "ddpjob_devcluster"}, set(), TORCH),
}


# Third-party packages a package may import only lazily (inside the function that needs
# them): the API checks `template` against the kubernetes client's generated OpenAPI models
# (data types only; it never talks to a cluster), and stays importable without the client.
LAZY_THIRD_PARTY: dict[str, set[str]] = {"ddpjob.api": {"kubernetes"}}


def package_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "ddpjob":
        if len(parts) == 1 or (len(parts) == 2 and not (SOURCES["ddpjob"] / parts[1]).is_dir()):
            return PURE
        return ".".join(parts[:2])
    return parts[0]


def module_name(path: pathlib.Path) -> str:
    for top, base in SOURCES.items():
        if path.is_relative_to(base):
            rel = path.relative_to(base).with_suffix("")
            parts = [top, *rel.parts]
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    raise ValueError(path)


def is_module(name: str) -> bool:
    base = SOURCES.get(name.split(".")[0])
    if base is None:
        return False
    path = base.parent / name.replace(".", "/")
    return path.is_dir() or path.with_suffix(".py").exists()


def imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, bool]]:
    """(imported module, lazy) for every import in the tree; relative ones resolved."""
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((alias.name, lazy) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = module.split(".")[: len(module.split(".")) - child.level + (1 if is_package else 0)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                found.append((target, lazy))
                # `from ddpjob import render` imports the subpackage ddpjob.render
                found.extend((f"{target}.{a.name}", lazy) for a in child.names if is_module(f"{target}.{a.name}"))
            visit(child, inner)

    visit(tree, False)
    return found


def allowed(granted: set[str], target: str) -> bool:
    return any(package_of(target) == g or target == g or target.startswith(g + ".") for g in granted)


def violations(path: pathlib.Path, source: str | None = None) -> list[str]:
    module = module_name(path)
    package = package_of(module)
    rule = RULES.get(package)
    assert rule is not None, f"{module}: no import rule for package {package}; add one to RULES and docs/design.md"
    eager, lazy_ok, forbidden = rule
    tree = ast.parse(source if source is not None else path.read_text(), str(path))
    bad = []
    for target, lazy in imports(tree, module, path.name == "__init__.py"):
        top = target.split(".")[0]
        if top in SOURCES:
            if not (allowed(eager, target) or (lazy and allowed(lazy_ok, target))):
                bad.append(f"{module} imports {target}{' (lazily)' if lazy else ''}")
        elif top in forbidden and not (lazy and top in LAZY_THIRD_PARTY.get(package, ())):
            bad.append(f"{module} imports {top}{' (lazily)' if lazy else ''}")
    return bad


ALL = sorted(p for base in SOURCES.values() for p in base.rglob("*.py"))


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_module_keeps_its_package_boundary(path: pathlib.Path) -> None:
    assert violations(path) == []


@pytest.mark.parametrize(
    "package, line",
    [
        ("ddpjob/api/spec.py", "import kopf"),
        ("ddpjob/api/spec.py", "from kubernetes import client"),
        ("ddpjob/render/objects.py", "from ddpjob.operator import kube"),
        ("ddpjob/job/lifecycle.py", "import subprocess"),
        ("ddpjob/local/runner.py", "from ddpjob.operator import handlers"),
        ("ddpjob/operator/controller.py", "from ddpjob.local import runner"),
        ("ddpjob/operator/controller.py", "import ddpjob_devcluster.controlplane.controlplane"),
        ("ddpjob/cli/file_commands.py", "from ddpjob.local.runner import run_job"),  # eager: only lazily allowed
        ("ddpjob/client/client.py", "from ddpjob.cli import logs"),
        ("ddpjob/client/client.py", "from ddpjob.cli.cluster import job_pods"),
        ("ddpjob/cluster/jobs.py", "from ddpjob.cli import output"),
        ("ddpjob/cluster/jobs.py", "from ddpjob.client import Job"),
        ("ddpjob/cluster/logs.py", "import subprocess"),
        ("ddpjob/client/local_backend.py", "from ddpjob.local.background import BackgroundRun"),  # eager
        ("ddpjob/contract.py", "from ddpjob.api import names"),
        ("ddpjob/curves/reader.py", "from ddpjob.api import names"),
        ("ddpjob/curves/plot.py", "import subprocess"),
        ("ddpjob/curves/record.py", "import torch"),
        ("ddpjob/job/lifecycle.py", "from ddpjob import render"),
        ("../trainer_image/ddpjob_trainer/train.py", "import kopf"),
        ("../trainer_image/ddpjob_trainer/train.py", "from ddpjob.render import objects"),
    ],
)
def test_the_rules_bite(package: str, line: str) -> None:
    path = (SOURCES["ddpjob"].parent / package).resolve()
    assert violations(path, path.read_text() + "\n" + line + "\n"), f"{line!r} in {package} went unnoticed"


def test_lazy_imports_are_allowed_only_where_granted() -> None:
    path = SOURCES["ddpjob"] / "cli" / "file_commands.py"
    assert violations(path, "def f():\n    from ddpjob.local.runner import run_job\n") == []
    assert violations(path, "def f():\n    import kopf\n")


def test_ddpjob_run_never_loads_kopf() -> None:
    import subprocess

    code = (
        "import sys, ddpjob.cli.main, ddpjob.local.runner\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('kopf', 'kubernetes', 'torch'))\n"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_nothing_edits_the_import_path() -> None:
    """Packages are imported as packages: no script, benchmark or test edits sys.path."""
    needles = ("sys.path." + "insert", "sys.path." + "append")
    offenders = [
        str(p.relative_to(ROOT))
        for folder in ("operator", "trainer_image", "tests", "benchmarks", "hack")
        for p in (ROOT / folder).rglob("*.py")
        if any(n in p.read_text() for n in needles)
    ]
    assert offenders == []


MAX_LINES = 300


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_300_lines(path: pathlib.Path) -> None:
    """Modules stay small enough to read whole: split one along its concepts when it grows."""
    rel = str(path.relative_to(ROOT))
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{rel} has {lines} lines (at most {MAX_LINES}): split it along its concepts"


def _edges(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """The modules a module's imports load, at any depth: `from P import m` loads the
    module P.m where there is one, else P itself (a name from P)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if is_module(f"{target}.{alias.name}") else target)
    return found


def _graph(package: str | None = None) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports (of any package: None), at any
    depth, lazily or for type checking alike: a circle is one however its imports are placed."""
    graph: dict[str, set[str]] = {}
    for path in ALL:
        module = module_name(path)
        if package is not None and package_of(module) != package:
            continue
        targets = _edges(ast.parse(path.read_text()), module, path.name == "__init__.py")
        graph[module] = {t for t in targets if package in (None, package_of(t)) and t != module and is_module(t)}
    return graph


def circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of the graph, or None."""
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done

    def walk(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], node, nxt] if nxt in path else [node, nxt]
            if nxt not in state and (found := walk(nxt, [*path, node])) is not None:
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := walk(start, [])) is not None:
            return found
    return None


PACKAGES = sorted({package_of(module_name(p)) for p in ALL})


@pytest.mark.parametrize("package", PACKAGES)
def test_no_package_has_an_import_circle(package: str) -> None:
    """A policy imports `Step` for its types and the step never imports a policy back: each
    module can be read (and tested) after the ones it builds on. Where one module must
    name another's type that imports it, it names what it uses in a protocol of its own:
    the dev cluster's garbage collector names the store's methods it calls, the trainer's
    epoch.py the fields of the run (train.py's Trainer) it reads."""
    assert circle(_graph(package)) is None


def test_no_import_circle_crosses_packages() -> None:
    assert circle(_graph()) is None


def test_every_package_is_checked_for_circles() -> None:
    assert {
        "ddpjob.api",
        "ddpjob.cli",
        "ddpjob.client",
        "ddpjob.cluster",
        "ddpjob.operator",
        "ddpjob_devcluster",
        "ddpjob_trainer",
    } <= set(PACKAGES)


def test_a_circle_is_found() -> None:
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b"}, "b": set()}) is None
