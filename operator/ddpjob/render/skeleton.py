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


@functools.lru_cache(maxsize=64)
def _skeleton(template: jinja2.Template, shape: tuple[tuple[str, bool], ...]) -> tuple[Any, bool]:
    """The parsed template with placeholders, and whether every placeholder sits alone
    in a YAML node (so `fill` can replace nodes)."""
    try:
        text = template.render(**{name: _Placeholder(name, truthy) for name, truthy in shape})
        doc = _load(text)
    except Exception:  # the template does more with a value than insert it: no skeleton
        return None, False
    whole = _count_marks(doc)
    return doc, whole == text.count(_MARK)


def _count_marks(node: Any) -> int:
    if isinstance(node, dict):
        return sum(_count_marks(k) + _count_marks(v) for k, v in node.items())
    if isinstance(node, list):
        return sum(_count_marks(v) for v in node)
    return 1 if isinstance(node, str) and node.startswith(_MARK) and node.count(_MARK) == 1 else 0


def _fill(node: Any, values: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        return {_fill(k, values): _fill(v, values) for k, v in node.items()}
    if isinstance(node, list):
        return [_fill(v, values) for v in node]
    if isinstance(node, str) and node.startswith(_MARK):
        value = values[node[len(_MARK):]]
        if value is None or type(value) in (str, int, bool):
            return value  # immutable, and what `tojson` + YAML give back
        # A JSON round trip: fresh objects, and the same types `tojson` + YAML give.
        return json.loads(json.dumps(value))
    return node


def render(env: jinja2.Environment, template_name: str, /, **values: Any) -> Any:
    template = env.get_template(template_name)
    shape = tuple(sorted((k, bool(v)) for k, v in values.items()))
    doc, exact = _skeleton(template, shape)
    if not exact:
        return _load(template.render(**values))
    return _fill(doc, values)


def slow_render(env: jinja2.Environment, template_name: str, /, **values: Any) -> Any:
    """The reference: render the text and parse it (what `render` must equal)."""
    return yaml.safe_load(env.get_template(template_name).render(**values))
