"""Safe NaSVA checkpoints (docs/evaluation.md): a directory with ``model.pt`` (a flat state dict, loaded with
``torch.load(..., weights_only=True)``; ``model.safetensors`` accepted too), ``config.json`` and ``train_log.jsonl``.
The authors' weights-only ``{"epoch", "model_state_dict"}`` files (``NSVA_*.pth``, ``epoch-N.pth``) load too.
Nothing but tensors and plain containers is ever unpickled.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from .. import __version__ as TOOLKIT_VERSION
from .errors import NasvaInputError
from .model import (
    NaSVA,
    NasvaModelConfig,
    adapt_state_dict,
    infer_config_from_state_dict,
)

FORMAT_VERSION = 1
MODEL_FILE = "model.pt"
CONFIG_FILE = "config.json"
LOG_FILE = "train_log.jsonl"
RESUME_FILE = "resume.pt"


def atomic_write_bytes(path: Path, write) -> None:
    """Write through a temporary file in the same folder, then rename (a crash never leaves half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, lambda f: f.write(json.dumps(obj, indent=2, sort_keys=True).encode("utf-8")))


def atomic_torch_save(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, lambda f: torch.save(obj, f))


def safe_load(path: str | Path) -> Any:
    """``torch.load(path, map_location="cpu", weights_only=True)``: tensors and plain containers only."""
    return torch.load(path, map_location="cpu", weights_only=True)


def base_config(model_cfg: NasvaModelConfig, **extra: Any) -> dict[str, Any]:
    """The ``config.json`` mapping (architecture fields at top level)."""
    cfg = {"format_version": FORMAT_VERSION, "model_type": "nasva", **model_cfg.to_dict(),
           "toolkit_version": TOOLKIT_VERSION,
           "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}
    cfg.update(extra)
    return cfg


def save_checkpoint(ckpt_dir: str | Path, model: NaSVA, config: Mapping[str, Any]) -> None:
    """Write ``model.pt`` (state dict, visual PE buffer included) and ``config.json``."""
    d = Path(ckpt_dir)
    atomic_torch_save(d / MODEL_FILE, {k: v.detach().cpu() for k, v in model.state_dict().items()})
    atomic_write_json(d / CONFIG_FILE, dict(config))


def _read_state_dict(path: Path) -> Mapping[str, Any]:
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path), device="cpu")
    try:
        obj = safe_load(path)
    except Exception as e:
        raise NasvaInputError(f"cannot read checkpoint weights {path} as a weights-only file: {e}") from e
    if not isinstance(obj, Mapping):
        raise NasvaInputError(f"checkpoint {path} holds a {type(obj).__name__}, not a state dict")
    return obj


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu"
                    ) -> tuple[NaSVA, dict[str, Any], list[str]]:
    """Load a checkpoint directory (or an official ``.pth`` file): (model in eval mode, config, ignored keys).

    The model is built from ``config.json`` and loaded with ``strict=True``; a state dict whose sizes differ from the
    config is an error naming the mismatch."""
    p = Path(path)
    if p.is_dir():
        cfg_path = p / CONFIG_FILE
        if not cfg_path.exists():
            raise NasvaInputError(f"{p} is not a NaSVA checkpoint: {CONFIG_FILE} is missing")
        with open(cfg_path, encoding="utf-8") as f:
            config = json.load(f)
        if config.get("model_type") != "nasva":
            raise NasvaInputError(f"{cfg_path}: model_type {config.get('model_type')!r} is not 'nasva'")
        weights = next((p / n for n in (MODEL_FILE, "model.safetensors") if (p / n).exists()), None)
        if weights is None:
            hint = " (training has not finished: rerun the same train command to resume it)" \
                if (p / RESUME_FILE).exists() else ""
            raise NasvaInputError(f"{p}: no {MODEL_FILE} or model.safetensors{hint}")
        sd, ignored = adapt_state_dict(_read_state_dict(weights))
        model_cfg = NasvaModelConfig.from_dict(config)
    elif p.is_file():
        sd, ignored = adapt_state_dict(_read_state_dict(p))
        model_cfg = infer_config_from_state_dict(sd)
        config = base_config(model_cfg, source=str(p), visual_backbone=None, text_encoder=None)
    else:
        raise NasvaInputError(f"checkpoint not found: {p}")
    model = NaSVA(model_cfg)
    if "visual_pos_enc.pe" not in sd:  # a buffer some exports leave out: it is fixed, take ours
        sd["visual_pos_enc.pe"] = model.visual_pos_enc.pe
    try:
        model.load_state_dict(sd, strict=True)
    except RuntimeError as e:
        detail = " ".join(line.strip() for line in str(e).splitlines()[1:4])
        raise NasvaInputError(f"checkpoint {p} does not match its config: {detail[:400]}") from e
    return model.to(device).eval(), config, ignored
