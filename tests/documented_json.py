"""The JSON documents' shape as docs/json.md documents it, read from its tables, and a validator for it.

Each ``### NAME`` heading followed by a table is an object type: one row per field, with its type and when it is
present. Types: ``string``, ``integer``, ``number``, ``boolean``, ``null``, a JSON literal, ``one of`` literals,
``list of T``, ``map of T``, ``A or B``, parentheses, or another table's name.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "docs" / "json.md"
ALWAYS, DIAGNOSIS = "always", "diagnosis"
PRIMITIVES = {"string": str, "number": (int, float), "boolean": bool, "null": type(None)}


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    present: str


def documented(page: Path = PAGE) -> dict[str, dict[str, Field]]:
    """Each documented object type: its fields by name, in the page's order."""
    types: dict[str, dict[str, Field]] = {}
    name = None
    for line in page.read_text().splitlines():
        heading = re.fullmatch(r"### (.+)", line)
        if heading:
            name = heading.group(1).strip()
            types[name] = {}
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        if name is None or not line.startswith("| `") or len(cells) != 4:
            continue
        field, kind, present = (cell.strip("`") for cell in cells[:3])
        types[name][field] = Field(field, kind, present)
    return {name: fields for name, fields in types.items() if fields}


class Invalid(AssertionError):
    pass


def validate(doc, type_name: str = "report", types: dict | None = None) -> None:
    """Raise ``Invalid`` (naming the path to the first wrong value) unless ``doc`` has the documented shape: strict
    JSON, every ``always`` field there, a ``diagnosis`` field exactly at that level, no field left undocumented."""
    types = types or documented()
    json.loads(json.dumps(doc), parse_constant=_not_json)
    _check(doc, type_name, types, "$", None)


def _not_json(constant: str):
    raise Invalid(f"{constant} is not JSON")


def _check(value, kind: str, types: dict, where: str, disclosure: str | None) -> None:
    kind = kind.strip()
    alternatives = _split(kind, " or ")
    if len(alternatives) > 1:
        failures = []
        for alternative in alternatives:
            try:
                return _check(value, alternative, types, where, disclosure)
            except Invalid as exc:
                failures.append(str(exc))
        raise Invalid(f"{where}: {value!r} is none of {kind} ({'; '.join(failures)})")
    if kind.startswith("(") and kind.endswith(")"):
        return _check(value, kind[1:-1], types, where, disclosure)
    if kind.startswith("one of "):
        allowed = [json.loads(literal) for literal in _split(kind[len("one of "):], ", ")]
        if value not in allowed or type(value) is not type(allowed[allowed.index(value)]):
            raise Invalid(f"{where}: {value!r} is not one of {allowed}")
        return None
    if kind.startswith(("list of ", "map of ")):
        container, inner = kind.split(" of ", 1)
        expected = list if container == "list" else dict
        if not isinstance(value, expected):
            raise Invalid(f"{where}: {value!r} is not a {container}")
        items = enumerate(value) if container == "list" else value.items()
        for key, item in items:
            _check(item, inner, types, f"{where}[{key!r}]", disclosure)
        return None
    if kind in types:
        return _object(value, types[kind], types, where, disclosure)
    if kind == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            raise Invalid(f"{where}: {value!r} is not an integer")
        return None
    if kind in PRIMITIVES:
        if not isinstance(value, PRIMITIVES[kind]) or (kind == "number" and isinstance(value, bool)):
            raise Invalid(f"{where}: {value!r} is not a {kind}")
        return None
    literal = json.loads(kind)  # a type that is none of the above must be a literal, or the page is wrong
    if value != literal or type(value) is not type(literal):
        raise Invalid(f"{where}: {value!r} is not {kind}")
    return None


def _object(value, fields: dict[str, Field], types: dict, where: str, disclosure: str | None) -> None:
    if not isinstance(value, dict):
        raise Invalid(f"{where}: {value!r} is not an object")
    disclosure = value.get("disclosure", disclosure)  # a report inside another document has its own level
    undocumented = set(value) - set(fields)
    if undocumented:
        raise Invalid(f"{where}: undocumented fields {sorted(undocumented)}")
    for field in fields.values():
        required = field.present == ALWAYS or (field.present == DIAGNOSIS and disclosure == DIAGNOSIS)
        if field.name not in value:
            if required:
                raise Invalid(f"{where}: `{field.name}` is missing")
            continue
        if field.present == DIAGNOSIS and disclosure != DIAGNOSIS:
            raise Invalid(f"{where}: `{field.name}` is there at the {disclosure} level")
        _check(value[field.name], field.type, types, f"{where}.{field.name}", disclosure)


def _split(text: str, separator: str) -> list[str]:
    """``text`` split at ``separator`` outside parentheses and quotes."""
    parts, depth, quoted, start, i = [], 0, False, 0, 0
    while i < len(text):
        char = text[i]
        if char == '"':
            quoted = not quoted
        elif not quoted and char in "()":
            depth += 1 if char == "(" else -1
        elif not quoted and depth == 0 and text.startswith(separator, i):
            parts.append(text[start:i])
            i = start = i + len(separator)
            continue
        i += 1
    return [*parts, text[start:]]
