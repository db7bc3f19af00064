"""A JSON Schema check of the dialect the server's event schemas use (type, properties, required,
enum, anyOf, items): enough to refuse an event whose data is not what its type promises."""
from __future__ import annotations

from typing import Any, Optional


def _type_matches(expected: Any, value: Any) -> bool:
    if expected == "string":
        return isinstance(value, str)
    if expected == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "null":
        return value is None
    if expected == "array":
        return isinstance(value, list)
    if expected == "object":
        return isinstance(value, dict)
    return True


def mismatch(schema: dict[str, Any], value: Any, at: str = "$") -> Optional[str]:
    """Where ``value`` first fails ``schema`` ("$.data.media[0].url: ..."), or None when it conforms."""
    any_of = schema.get("anyOf")
    if any_of is not None and all(mismatch(s, value, at) is not None for s in any_of):
        return f"{at}: matches none of its {len(any_of)} alternatives"
    if "type" in schema and not _type_matches(schema["type"], value):
        return f"{at}: not of type {schema['type']}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{at}: not one of {', '.join(map(str, schema['enum']))}"
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            found = mismatch(schema["items"], item, f"{at}[{i}]")
            if found is not None:
                return found
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                return f"{at}.{name}: missing"
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                found = mismatch(sub, value[name], f"{at}.{name}")
                if found is not None:
                    return found
    return None
