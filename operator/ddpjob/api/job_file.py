"""Reading a DDPJob file the way a hostile file cannot hurt: one line of error, never a
traceback, a hang or unbounded memory. The `ddpjob` command's file arguments and the
Python client's `train(path)` read files here.

- bytes first: at most MAX_BYTES (the API server refuses objects above ~1.5 MB anyway);
- UTF-8 only (a BOM is allowed), as Kubernetes reads YAML; anything else is one line
  naming the file and the first bad byte;
- YAML events are walked before anything is built: nesting deeper than MAX_DEPTH and
  more than MAX_NODES nodes are refused (PyYAML builds nested nodes recursively, so a
  deep file would otherwise be a RecursionError);
- aliases: the size of the file with every alias expanded is computed on each
  document's node graph (each node once, while the document holds every node: a size
  remembered by `id()` across documents could be read back for a new node at a freed
  node's address) and capped at MAX_NODES for all documents together, so a "billion
  laughs" file is refused before anything expands it;
- an integer longer than Python converts (4,300 digits; it raised a ValueError, a
  traceback) is refused naming its line; a shorter one reaches the field's own check;
- a mapping with the same key twice is an error (YAML 1.2 says keys are unique; PyYAML
  silently keeps the last one);
- only plain data: the safe loader's types.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from ddpjob.api.spec import DDPJob, InvalidSpec, parse_job

MAX_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_NODES = 100_000
MAX_INT_DIGITS = sys.int_info.default_max_str_digits  # 4,300


class FileError(Exception):
    pass


class _UniqueKeyLoader(yaml.SafeLoader):
    """The safe loader, refusing duplicate mapping keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: let PyYAML report it
                break
            if duplicate:
                mark = key_node.start_mark
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (line {mark.line + 1}, column {mark.column + 1})", None
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        if len(node.value) > MAX_INT_DIGITS:
            mark = node.start_mark
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"an integer of {len(node.value)} characters (at most {MAX_INT_DIGITS}; "
                f"line {mark.line + 1}, column {mark.column + 1})",
                None,
            )
        return super().construct_yaml_int(node)


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)


def _check_events(text: str) -> None:
    depth = nodes = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                where = f" at line {mark.line + 1}" if mark is not None else ""
                raise _Limit(f"nested deeper than {MAX_DEPTH} levels{where}")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        if isinstance(event, yaml.NodeEvent):
            nodes += 1
            if nodes > MAX_NODES:
                raise _Limit(f"more than {MAX_NODES} YAML nodes")


def _expanded_size(node: yaml.Node) -> int:
    """Nodes in the document once every alias is expanded, counting each distinct node once
    (iterative: the graph can be deep in expansion even when shallow in text). The memo
    lives as long as the document, which keeps every node it names alive."""
    memo: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        current, children_done = stack.pop()
        if id(current) in memo:
            continue
        kids: list[yaml.Node] = []
        if isinstance(current, yaml.SequenceNode):
            kids = list(current.value)
        elif isinstance(current, yaml.MappingNode):
            kids = [n for pair in current.value for n in pair]
        if children_done:
            memo[id(current)] = min(1 + sum(memo[id(k)] for k in kids), MAX_NODES + 1)
        else:
            stack.append((current, True))
            stack.extend((k, False) for k in kids if id(k) not in memo)
    return memo[id(node)]


class _Limit(Exception):
    pass


def _decode(path: str, data: bytes) -> str:
    if len(data) > MAX_BYTES:
        raise FileError(f"{path}: is {len(data)} bytes; a DDPJob file is at most {MAX_BYTES} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FileError(
            f"{path}: is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); save it as UTF-8"
        ) from None


def parse_documents(path: str, text: str) -> list[Any]:
    """The YAML documents of `text` (None documents dropped), or FileError naming `path`."""
    try:
        _check_events(text)
        loader = _UniqueKeyLoader(text)
        try:
            docs, expanded = [], 0
            while loader.check_node():
                node = loader.get_node()
                expanded += _expanded_size(node) if node is not None else 0
                if expanded > MAX_NODES:
                    raise _Limit(f"YAML aliases expand to more than {MAX_NODES} nodes")
                docs.append(loader.construct_document(node) if node is not None else None)
        finally:
            loader.dispose()
    except _Limit as exc:
        raise FileError(f"{path}: refused: {exc}") from None
    except yaml.YAMLError as exc:
        # One line, like every other error: where, then what.
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise FileError(f"{path}: not valid YAML: {where}{what}") from None
    except RecursionError:
        raise FileError(f"{path}: refused: nested too deeply") from None
    return [d for d in docs if d is not None]


def load_documents(path: str) -> list[Any]:
    """Every document of a file (or `-`: standard input), checked as the module says."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_BYTES + 1)
        else:
            with Path(path).open("rb") as f:
                data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise FileError(f"{path}: cannot read: {exc.strerror}") from None
    docs = parse_documents(path, _decode(path, data))
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
