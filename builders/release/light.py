"""A config's features as the release writes them without importing ``datasets`` (half a second), and the encoder of
rows into Arrow that goes with them (docs/architecture.md, "The release step"; issue 19, the edit rerun).

``feature_record(features)`` (needs ``datasets``) describes a ``datasets.Features`` once as plain JSON: its
``to_dict()``, its Arrow schema, whether a column holds media or needs decoding, the Parquet writer options that
``datasets`` would use (``get_parquet_column_options``, ``DEFAULT_CDC_OPTIONS``). ``LightFeatures(record)`` stands for
the features wherever the release flow only needs those (the column names, ``arrow_schema``, ``to_dict()``); the
release cache (``builders.release.cache``) keeps the records keyed by the source of the loading script, so a rewrite
whose features are known imports no ``datasets``.

``encode_light(rows, features)`` encodes rows the way ``encode_rows`` does with ``datasets`` (``Features.encode_column``
then ``OptimizedTypedSequence``), for features made of ``Value`` (booleans, integers, float32/float64, strings),
``List`` (any length) and nested dicts only: the values go through the same conversions as
``encode_nested_example`` (its first-element rule for lists included), and the result must then consist of exactly
the Python types the Arrow types take (``str`` for strings, ``int`` for integers, ``float`` -- or an ``int`` a float
holds exactly -- for floats, ``bool``, ``dict`` with no key outside the struct, ``list``/``tuple``, ``None``), which
Arrow converts to the declared type exactly as ``datasets``' inference-then-cast does. Anything else (numpy values,
other feature types, a value Arrow rejects) returns ``None``, and the caller encodes with ``datasets``: the bytes
written never depend on which encoder ran.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from datasets import Features

__all__ = ["LIGHT_FORMAT", "LightFeatures", "encode_light", "feature_record", "light_plan"]

#: bump when a record of the same features would differ (its fields, the encoder's rules)
LIGHT_FORMAT = 1

_CONVERT = {
    "bool": bool, "string": str, "large_string": str, "float32": float, "float64": float,
    **{f"{s}int{b}": int for s in ("", "u") for b in (8, 16, 32, 64)},
}
#: the Python types a value may have on the way in (anything else is left to datasets)
_SCALARS = frozenset({str, int, float, bool})
#: the largest integer each float type holds exactly (an int in a float list is accepted up to it)
_EXACT_INT = {"float32": 1 << 24, "float64": 1 << 53}


class _Node:
    """One node of a feature tree: ``value`` (``dtype``), ``list`` (``item``) or ``struct`` (``fields``)."""

    __slots__ = ("kind", "dtype", "convert", "item", "fields", "names")

    def __init__(self, kind: str, dtype: str = "", item: _Node | None = None,
                 fields: list[tuple[str, _Node]] | None = None) -> None:
        self.kind, self.dtype, self.item = kind, dtype, item
        self.convert = _CONVERT.get(dtype)
        self.fields = fields or []
        self.names = frozenset(k for k, _ in self.fields)


def _plan(spec: Any) -> _Node | None:
    """The node of a ``Features.to_dict()`` entry, or ``None`` when it holds a type the light encoder does not take."""
    if not isinstance(spec, Mapping):
        return None
    kind = spec.get("_type")
    if kind is None or isinstance(kind, Mapping):  # a struct (a field named "_type" is a sub-feature, not a tag)
        fields = [(k, _plan(v)) for k, v in spec.items()]
        return None if any(n is None for _, n in fields) else _Node("struct", fields=fields)  # type: ignore[misc]
    if kind == "Value":
        dtype = spec.get("dtype")
        return _Node("value", dtype=dtype) if dtype in _CONVERT and set(spec) <= {"_type", "dtype", "id"} else None
    if kind == "List" and spec.get("length", -1) == -1 and set(spec) <= {"_type", "feature", "length", "id"}:
        item = _plan(spec.get("feature"))
        return None if item is None else _Node("list", item=item)
    return None


def light_plan(features_dict: Mapping[str, Any]) -> dict[str, _Node] | None:
    """The node of every column of a ``Features.to_dict()``, or ``None`` when one is not light-encodable."""
    plan = {k: _plan(v) for k, v in features_dict.items()}
    return None if any(n is None for n in plan.values()) else plan  # type: ignore[return-value]


def feature_record(features: Features) -> dict[str, Any] | None:
    """``features`` described as plain JSON (see the module docstring), or ``None`` when the description would not
    stand for them (``Features.from_dict`` of the dict is not the same features)."""
    from datasets import Features as DsFeatures
    from datasets import config as ds_config
    from datasets.arrow_writer import get_parquet_column_options
    from datasets.features.features import require_decoding, require_storage_embed

    spec = features.to_dict()
    schema = features.arrow_schema
    try:
        if DsFeatures.from_dict(spec) != features or DsFeatures.from_dict(spec).arrow_schema != schema:
            return None
    except Exception:  # noqa: BLE001 - a feature type that does not round-trip is simply not recorded
        return None
    return {
        "format": LIGHT_FORMAT, "features": spec,
        "arrow_schema": base64.b64encode(schema.serialize().to_pybytes()).decode("ascii"),
        "media": any(require_storage_embed(f) for f in features.values()),
        "decodes": any(require_decoding(f) for f in features.values()),
        "column_options": get_parquet_column_options(features, schema),
        "cdc": dict(ds_config.DEFAULT_CDC_OPTIONS),
    }


class LightFeatures(Mapping[str, Any]):
    """One config's features from its ``feature_record``: a mapping of column name -> its ``to_dict()`` entry, with
    ``arrow_schema``, ``to_dict()``, ``media``, ``decodes``, the Parquet writer options, and ``full()`` for the
    ``datasets.Features`` themselves (imports ``datasets``)."""

    def __init__(self, record: Mapping[str, Any]) -> None:
        self.record = record
        self._spec: dict[str, Any] = record["features"]
        self.arrow_schema: pa.Schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(record["arrow_schema"])))
        self.media: bool = bool(record["media"])
        self.decodes: bool = bool(record["decodes"])
        self.column_options: dict[str, Any] = record["column_options"]
        self.cdc: dict[str, Any] = record["cdc"]
        self._full: Features | None = None

    def __getitem__(self, key: str) -> Any:
        return self._spec[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._spec)

    def __len__(self) -> int:
        return len(self._spec)

    def __repr__(self) -> str:
        return f"LightFeatures({list(self._spec)})"

    def to_dict(self) -> dict[str, Any]:
        return self._spec

    def full(self) -> Features:
        """The ``datasets.Features`` these stand for (imports ``datasets``)."""
        if self._full is None:
            from datasets import Features as DsFeatures

            self._full = DsFeatures.from_dict(self._spec)
        return self._full


# ------------------------------------------------------------------------------------------------------- encoding


def _non_null(obj: Any, node: _Node | None) -> bool:
    """``datasets``' ``_check_non_null_non_empty_recursive``."""
    if obj is None:
        return False
    if isinstance(obj, (list, tuple)) and (node is None or node.kind == "list"):
        if not obj:
            return False
        return _non_null(obj[0], None if node is None else node.item)
    return True


def _encode(node: _Node, obj: Any, level: int) -> Any:
    """``datasets``' ``encode_nested_example`` for value, list and struct nodes, on plain Python values only (a
    ``TypeError`` otherwise: ``cast_to_python_objects``, which ``datasets`` runs first, leaves those unchanged)."""
    if node.kind == "struct":
        if level == 0 and obj is None:
            raise ValueError("Got None but expected a dictionary instead")
        if obj is not None and type(obj) is not dict:
            raise TypeError(f"not a dict: {type(obj).__name__}")
        return None if obj is None else {k: _encode(sub, obj.get(k), level + 1) for k, sub in node.fields}
    if node.kind == "list":
        if obj is None:
            return None
        if type(obj) is not list and type(obj) is not tuple:
            raise TypeError(f"not a list: {type(obj).__name__}")
        if len(obj) > 0:
            sub = node.item
            for first in obj:
                if _non_null(first, sub):
                    break
            try:
                changed = bool(_encode(sub, first, level + 1) != first)  # type: ignore[arg-type]
            except ValueError:
                changed = False
            if changed:
                return [_encode(sub, o, level + 1) for o in obj]  # type: ignore[arg-type]
        return list(obj)
    if obj is None:
        return None
    if type(obj) not in _SCALARS:
        raise TypeError(f"not a plain scalar: {type(obj).__name__}")
    return node.convert(obj)


def _checker(node: _Node) -> Any:
    """A function telling whether an encoded value holds exactly the Python types that Arrow converts to ``node``'s
    type as ``datasets``' inference and cast would (see the module docstring)."""
    if node.kind == "value":
        if node.convert is float:
            bound = _EXACT_INT[node.dtype]
            return lambda v: v is None or type(v) is float or (type(v) is int and -bound <= v <= bound)
        want = {str: str, bool: bool, int: int}[node.convert]
        return lambda v: v is None or type(v) is want
    if node.kind == "list":
        item = _checker(node.item)  # type: ignore[arg-type]
        return lambda v: v is None or ((type(v) is list or type(v) is tuple) and all(map(item, v)))
    names, fields = node.names, [(k, _checker(sub)) for k, sub in node.fields]
    return lambda v: v is None or (type(v) is dict and v.keys() <= names and all(c(v.get(k)) for k, c in fields))


def encode_light(rows: Sequence[Mapping[str, Any]], features: Mapping[str, Any], schema: pa.Schema
                 ) -> pa.Table | None:
    """``rows`` as an Arrow table of ``schema`` (the features' ``arrow_schema``), encoded as ``encode_rows`` would
    with ``datasets``; ``None`` when the features or the values are outside what this encoder takes (see the module
    docstring): the caller then encodes with ``datasets``."""
    plan = _plan_of(features)
    if plan is None:
        return None
    arrays = []
    try:
        for k, node in plan.items():
            column = [_encode(node, r[k], 1) for r in rows]
            if not all(map(_checker(node), column)):
                return None
            arrays.append(pa.array(column, type=schema.field(k).type))
        return pa.Table.from_arrays(arrays, schema=schema)
    except (TypeError, ValueError, OverflowError, AttributeError, KeyError, pa.ArrowException):
        return None


_PLANS: dict[int, tuple[Any, dict[str, _Node] | None]] = {}


def _plan_of(features: Mapping[str, Any]) -> dict[str, _Node] | None:
    """The light plan of ``features`` (``LightFeatures`` or ``datasets.Features``), memoised per object."""
    hit = _PLANS.get(id(features))
    if hit is not None and hit[0] is features:
        return hit[1]
    plan = light_plan(features.to_dict()) if hasattr(features, "to_dict") else None
    if len(_PLANS) > 256:
        _PLANS.clear()
    _PLANS[id(features)] = (features, plan)
    return plan
