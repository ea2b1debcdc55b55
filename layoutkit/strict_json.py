"""JSON that strict parsers read (a browser's ``JSON.parse``, asv, a dashboard): Python's
``json`` writes a float that is no number as a bare ``NaN`` or ``Infinity``, which JSON
does not have. Written here as null, no value: what a table, the report and the gate make of
a NaN anyway. Reading needs nothing of this: Python's ``json`` reads the ``NaN`` that files
written before hold, as it always did."""

import json
import math


def finite(value):
    """``value`` with each float that is not finite (NaN, an infinity), at any depth of its
    dicts, lists and tuples, as None (tuples become lists, as JSON writes them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


def dumps(value, **options) -> str:
    """``json.dumps`` (``options`` as it takes them) of :func:`finite` ``value``: strict JSON."""
    return json.dumps(finite(value), allow_nan=False, **options)
