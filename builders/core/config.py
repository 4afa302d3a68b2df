"""Corpus configs: dataclasses of paper defaults, overridden by ``--config file.yaml`` and ``--set key=value``.

Unknown keys, unreadable files, values of the wrong type, NaN or infinite numbers and values outside a key's range
(each config's ``validate``, with :func:`check_range`) are errors raised before any work starts: one line, exit 2
(docs/configuration.md).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A config file or override that cannot be applied."""


def read_config_file(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file not found: {p}")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ConfigError(f"config file {p} is not valid YAML: {e}") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {p} must hold a mapping of key: value, got {type(data).__name__}")
    return data


def parse_sets(items: list[str] | None) -> dict[str, Any]:
    """``["a=1", "b=[x, y]"]`` -> ``{"a": 1, "b": ["x", "y"]}`` (values parsed as YAML scalars/lists)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {item!r}")
        try:
            out[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as e:
            raise ConfigError(f"--set {item!r}: cannot parse the value: {e}") from e
    return out


def _coerce(name: str, value: Any, hint: Any) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(name, value, a)
            except ConfigError as e:
                errors.append(str(e))
        if len(errors) == 1:  # ``float | None``: the one type's own message ("expected a finite number")
            raise ConfigError(errors[0])
        raise ConfigError(f"{name}: {value!r} matches none of {hint}")
    if origin in (list, tuple):
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name}: expected a list, got {value!r}")
        inner = args[0] if args else Any
        items = [_coerce(name, v, inner) for v in value]
        return tuple(items) if origin is tuple else items
    if hint is Any:
        return value
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{name}: expected true/false, got {value!r}")
    if hint is int:
        # a YAML ``10.0`` is the integer 10; ``10.5``, NaN and infinities are refused
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, str):  # YAML 1.1 reads "1e-3" as a string
            try:
                value = float(value)
            except ValueError:
                raise ConfigError(f"{name}: expected a number, got {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{name}: expected a number, got {value!r}")
        if not math.isfinite(value):  # a NaN threshold compares False with everything: it would switch a filter off
            raise ConfigError(f"{name}: expected a finite number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ConfigError(f"{name}: expected a string, got {value!r}")
        return str(value)
    return value


def apply_overrides(cfg: Any, overrides: dict[str, Any]) -> Any:
    """Return a copy of dataclass ``cfg`` with ``overrides`` applied and type-checked."""
    hints = typing.get_type_hints(type(cfg))
    fields = {f.name for f in dataclasses.fields(cfg)}
    # dotted spellings of the specs ("mptva.gamma") name the flat keys ("mptva_gamma")
    overrides = {(k.replace(".", "_") if k not in fields and k.replace(".", "_") in fields else k): v
                 for k, v in overrides.items()}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ConfigError(f"unknown config key(s) for {type(cfg).__name__}: {', '.join(unknown)}; "
                          f"known: {', '.join(sorted(fields))}")
    changes = {k: _coerce(k, v, hints[k]) for k, v in overrides.items()}
    new = dataclasses.replace(cfg, **changes)
    validate = getattr(new, "validate", None)
    if validate is not None:
        validate()
    return new


def _bound(v: float) -> str:
    return f"{v:g}"


def check_range(cfg: Any, key: str, lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
                hi_open: bool = False, why: str = "") -> None:
    """Refuse ``cfg.<key>`` outside ``[lo, hi]`` (``lo_open``/``hi_open``: the bound itself is excluded; None: no
    bound) with one line naming the key, the range, ``why`` and the value (docs/configuration.md; issue 20: a value
    that passes the type check must not change results silently). A ``None`` value (an optional key) passes."""
    value = getattr(cfg, key)
    if value is None:
        return
    ok = ((lo is None or (value > lo if lo_open else value >= lo))
          and (hi is None or (value < hi if hi_open else value <= hi)))
    if ok:
        return
    if lo is not None and hi is not None:
        rng = f"in {'(' if lo_open else '['}{_bound(lo)}, {_bound(hi)}{')' if hi_open else ']'}"
    elif lo is not None:
        rng = f"{'>' if lo_open else '>='} {_bound(lo)}"
    else:
        rng = f"{'<' if hi_open else '<='} {_bound(hi)}"
    raise ConfigError(f"{key} must be {rng}{f' ({why})' if why else ''}, got {value!r}")


def check_ranges(cfg: Any, ranges: dict[str, tuple[float | None, float | None]], **kwargs: Any) -> None:
    """:func:`check_range` for each ``key: (lo, hi)`` of ``ranges`` (same ``lo_open``/``hi_open``/``why``)."""
    for key, (lo, hi) in ranges.items():
        check_range(cfg, key, lo, hi, **kwargs)


def to_dict(cfg: Any) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(cfg).items()}


def apply_paper_preset(cfg: Any, preset: dict[str, Any], paths: dict[str, tuple[str, Any]],
                       explicit: set[str] | None = None) -> Any:
    """``preset=paper`` for any corpus config: set the ``preset`` keys the user did not set explicitly (``explicit``;
    by default the keys that differ from the dataclass defaults), then fail loudly when a local model path that the
    resulting settings need is missing (``paths``: path key -> (setting key, value that needs it)). No silent fallback
    to a CPU model, never a download."""
    if explicit is None:
        base = type(cfg)()
        explicit = {f.name for f in dataclasses.fields(cfg) if getattr(cfg, f.name) != getattr(base, f.name)}
    cfg = dataclasses.replace(cfg, **{k: v for k, v in preset.items() if k not in explicit})
    missing = [k for k, (setting, value) in paths.items() if getattr(cfg, setting) == value and not getattr(cfg, k)]
    if missing:
        raise ConfigError("preset=paper needs local model paths (nothing is downloaded): set "
                          + ", ".join(f"--set {k}=PATH" for k in missing))
    return cfg
