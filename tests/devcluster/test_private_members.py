"""No module of the dev cluster reaches into another's private members: `<obj>._name` is
read only on `self`, `cls` or `super()`. What one part needs of another is a public method
(the store's `transaction`, `update`, `commit` and `delete_key` for server-side apply and the
garbage collector), so a part can change its insides without breaking its neighbours.

Read statically from the source, as tests/test_import_boundaries.py reads imports. The
only reaches left are into third-party libraries that name no public way, each listed
with its reason; an entry that no longer occurs fails too, so the list stays true.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEVCLUSTER = ROOT / "operator" / "ddpjob_devcluster"

# (module, expression) -> why: third-party internals with no public equivalent.
THIRD_PARTY: dict[tuple[str, str], str] = {
    ("demo/network.py", "os._exit"): "the standard library's documented exit without cleanup",
}


def private_reaches(source: str) -> list[tuple[int, str]]:
    """Each `<obj>._name` (not a dunder) whose object is not self, cls or super()."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            continue
        found.append((node.lineno, ast.unparse(node)))
    return found


def every_reach() -> dict[tuple[str, str], list[int]]:
    reaches: dict[tuple[str, str], list[int]] = {}
    for path in sorted(DEVCLUSTER.rglob("*.py")):
        module = path.relative_to(DEVCLUSTER).as_posix()
        for line, expression in private_reaches(path.read_text()):
            reaches.setdefault((module, expression), []).append(line)
    return reaches


def test_no_module_reaches_into_another_modules_private_members() -> None:
    found = every_reach()
    unexplained = [
        f"{module}:{lines[0]}: {expression}"
        for (module, expression), lines in sorted(found.items())
        if (module, expression) not in THIRD_PARTY
    ]
    assert not unexplained, "private members read from outside their object:\n" + "\n".join(unexplained)


def test_every_listed_third_party_reach_still_occurs() -> None:
    assert not set(THIRD_PARTY) - set(every_reach()), "remove the entries that no longer occur"


def test_the_check_sees_a_reach_and_leaves_self_cls_and_super_alone() -> None:
    source = (
        "class A(B):\n"
        "    def f(self, store):\n"
        "        self._ok = cls._ok = super()._ok\n"
        "        store._commit(1)\n"
        "        self.proc._reader.join()\n"
        "        return store.__class__\n"
    )
    assert sorted(private_reaches(source)) == [(4, "store._commit"), (5, "self.proc._reader")]
