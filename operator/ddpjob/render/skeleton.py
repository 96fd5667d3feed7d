"""Render a YAML template once, fill it many times.

Parsing YAML is the cost of rendering: about 13 ms per Pod with PyYAML's pure-Python
loader (2 ms with libyaml), so a 1,024-node gang spent seconds in the parser. Every value
the templates insert goes through `| tojson` as a whole YAML node, so the parsed document
is the same for every job apart from those nodes. A template is rendered once per shape
(which `{% if %}` branches are taken) with a placeholder for each value, parsed once, and
each render is a copy of that skeleton with the values put in their places.

`fill` gives what `yaml.safe_load(template.render(**values))` gives (a test checks that
on the project's templates); a template that embeds a value inside a larger string, or
uses one other than through `tojson`, falls back to that slow path instead.
"""

from __future__ import annotations

import functools
import json
import math
import pickle
from typing import Any

import jinja2
import yaml

_MARK = "__ddpjob_value__:"  # only placeholders are rendered into a skeleton


class _Placeholder:
    """Stands in for a value: true or false like it, rendered by `tojson` as a marker."""

    __slots__ = ("name", "truthy")

    def __init__(self, name: str, truthy: bool):
        self.name, self.truthy = name, truthy

    def __bool__(self) -> bool:
        return self.truthy

    def __str__(self) -> str:  # used other than through tojson: not a whole node
        return f"raw{_MARK}{self.name}"


def _dumps(value: Any, **kwargs: Any) -> str:
    return json.dumps(value, default=_placeholder_json, **kwargs)


def _placeholder_json(value: Any) -> str:
    if isinstance(value, _Placeholder):
        return _MARK + value.name
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def install(env: jinja2.Environment) -> None:
    """Let `tojson` in `env` render placeholders (plain values render as before)."""
    env.policies["json.dumps_function"] = _dumps


def _load(text: str) -> Any:
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


class _Skeleton:
    """A parsed template with placeholders: its pickled copy (unpickling is a deep copy
    in C, several times faster than walking the document in Python) and the path of each
    placeholder node, so a fill touches only the values."""

    __slots__ = ("frozen", "slots")

    def __init__(self, doc: Any, slots: list[tuple[tuple[Any, ...], str]]):
        self.frozen, self.slots = pickle.dumps(doc, pickle.HIGHEST_PROTOCOL), slots

    def fill(self, values: dict[str, Any]) -> Any:
        doc = pickle.loads(self.frozen)
        for path, name in self.slots:
            if not path:
                return _plain(values[name])
            node = doc
            for step in path[:-1]:
                node = node[step]
            node[path[-1]] = _plain(values[name])
        return doc


@functools.lru_cache(maxsize=64)
def _skeleton(template: jinja2.Template, shape: tuple[tuple[str, bool], ...]) -> _Skeleton | None:
    """The template's skeleton for one shape, or None where some placeholder does not sit
    alone in a YAML value node (then only rendering the text gives the right document)."""
    try:
        text = template.render(**{name: _Placeholder(name, truthy) for name, truthy in shape})
        doc = _load(text)
    # Whatever the template does with a placeholder (a filter, a comparison, arithmetic)
    # fails in its own way: jinja2's errors, TypeError, ValueError, YAML's errors...
    except Exception:  # noqa: BLE001 - the template does more with a value than insert it: no skeleton
        return None
    slots: list[tuple[tuple[Any, ...], str]] = []
    if not _find_slots(doc, (), slots) or len(slots) != text.count(_MARK):
        return None
    return _Skeleton(doc, slots)


def _find_slots(node: Any, path: tuple[Any, ...], slots: list[tuple[tuple[Any, ...], str]]) -> bool:
    """Collect the placeholder nodes' paths; False where a placeholder is a mapping key."""
    if isinstance(node, dict):
        return all(not _is_mark(k) and _find_slots(v, (*path, k), slots) for k, v in node.items())
    if isinstance(node, list):
        return all(_find_slots(v, (*path, i), slots) for i, v in enumerate(node))
    if _is_mark(node):
        slots.append((path, node[len(_MARK) :]))
    return True


def _is_mark(node: Any) -> bool:
    return isinstance(node, str) and node.startswith(_MARK) and node.count(_MARK) == 1


_SCALARS = (str, int, bool, type(None))


def _plain(value: Any) -> Any:
    """`value` as `tojson` and the YAML parser give it back: fresh containers, tuples as
    lists. Plain data is copied directly (a JSON round trip per value cost more than the
    rest of a Pod's render); anything else takes the round trip itself."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict and all(type(k) is str for k in value):
        return {k: _plain(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [_plain(v) for v in value]
    if kind is float and math.isfinite(value):
        return value
    return json.loads(json.dumps(value))


def render(env: jinja2.Environment, template_name: str, /, **values: Any) -> Any:
    template = env.get_template(template_name)
    shape = tuple(sorted((k, bool(v)) for k, v in values.items()))
    skeleton = _skeleton(template, shape)
    if skeleton is None:
        return _load(template.render(**values))
    return skeleton.fill(values)


def slow_render(env: jinja2.Environment, template_name: str, /, **values: Any) -> Any:
    """The reference: render the text and parse it (what `render` must equal)."""
    return yaml.safe_load(env.get_template(template_name).render(**values))
