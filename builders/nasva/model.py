"""The NaSVA multi-sentence grounding model (Li et al., ECCV 2024, §3.2, supp. §6.1; docs/evaluation.md).

Given T per-second visual features and K sentence features, the model returns one L2-normalised 64-d embedding per
second (``z_v``) and, per decoder layer, one per sentence (``z_t^l``); A^l = z_t^l · z_vᵀ ∈ [−1, 1]^{K×T} is the
alignment matrix (A = A^3 is the output, A^1 and A^2 feed only the loss).

Module and parameter names follow the authors' released model (``visual_proj``, ``visual_pos_enc.pe``,
``visual_encoder.layers.N.self_attn``, ``decoder.layers.N.multihead_attn``, ``decoder.norm``, ``v_sim_proj``, ...),
so a ``state_dict`` of theirs loads with ``strict=True`` once its unused ``timestamp_head.*`` keys are removed
(:func:`adapt_state_dict`). Attention runs batch-first here; ``nn.MultiheadAttention`` stores the same
tensors either way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass
class NasvaModelConfig:
    """Architecture hyper-parameters, paper/official defaults (Li et al., ECCV 2024, supp. §6.1;
    the authors' code, ``Lzq5/Video-Text-Alignment``)."""

    d_visual_in: int = 768  #: C_v: visual feature size (InternVideo-MM-L14 / CLIP ViT-L/14: 768)
    d_text_in: int = 768  #: C_t: text feature size (MiniLM: 384, MPNet: 768)
    d_model: int = 256  #: D (paper: "the model dimension D is set to 256")
    d_proj: int = 64  #: d, the cosine-similarity projection (paper: 64)
    nhead: int = 8
    enc_layers: int = 3  #: temporal aggregator: 3 transformer encoder layers
    dec_layers: int = 3  #: temporal grounding module: 3 transformer decoder layers
    dim_feedforward: int = 2048
    dropout: float = 0.1
    max_text_pe: int = 1024  #: rows of the learned text PE (``<narration>`` mode)
    max_visual_pe: int = 5000  #: rows of the sinusoidal visual PE table
    alignable_head: bool = True  #: kept for checkpoint compatibility; untrained by default (as in the authors' code)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NasvaModelConfig:
        """Build from a ``config.json`` mapping, ignoring keys that are not architecture fields."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def sinusoidal_table(length: int, d_model: int) -> Tensor:
    """``[1, length, d_model]``: pe[p, 2i] = sin(p / 10000^(2i/d)), pe[p, 2i+1] = cos(same) (Li et al., ECCV 2024,
    §3.2)."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe[None]


class PositionalEncoding(nn.Module):
    """Fixed sinusoidal table as a buffer named ``pe`` (saved in the state dict, as in the official model); no dropout."""

    def __init__(self, d_model: int, max_len: int = 5000):
        super().__init__()
        self.register_buffer("pe", sinusoidal_table(max_len, d_model))


def _with_pos(x: Tensor, pos: Tensor | None) -> Tensor:
    return x if pos is None else x + pos


class EncoderLayer(nn.Module):
    """DETR-style post-norm encoder layer: the PE is added to query and key of the attention only (the authors'
    code)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int, dropout: float):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, src: Tensor, pos: Tensor | None, key_padding_mask: Tensor | None) -> Tensor:
        q = k = _with_pos(src, pos)
        src2 = self.self_attn(q, k, src, key_padding_mask=key_padding_mask, need_weights=False)[0]
        src = self.norm1(src + self.dropout1(src2))
        src2 = self.linear2(self.dropout(F.relu(self.linear1(src))))
        return self.norm2(src + self.dropout2(src2))


class DecoderLayer(nn.Module):
    """DETR-style post-norm decoder layer: text self-attention, cross-attention to the frames, FFN (the authors'
    code)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int, dropout: float):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.multihead_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, tgt: Tensor, memory: Tensor, pos: Tensor | None, query_pos: Tensor | None,
                tgt_key_padding_mask: Tensor | None, memory_key_padding_mask: Tensor | None) -> Tensor:
        q = k = _with_pos(tgt, query_pos)
        tgt2 = self.self_attn(q, k, tgt, key_padding_mask=tgt_key_padding_mask, need_weights=False)[0]
        tgt = self.norm1(tgt + self.dropout1(tgt2))
        tgt2 = self.multihead_attn(_with_pos(tgt, query_pos), _with_pos(memory, pos), memory,
                                   key_padding_mask=memory_key_padding_mask, need_weights=False)[0]
        tgt = self.norm2(tgt + self.dropout2(tgt2))
        tgt2 = self.linear2(self.dropout(F.relu(self.linear1(tgt))))
        return self.norm3(tgt + self.dropout3(tgt2))


class Encoder(nn.Module):
    """Stack of encoder layers, no final norm (the authors' code)."""

    def __init__(self, layer_args: tuple[int, int, int, float], num_layers: int):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(*layer_args) for _ in range(num_layers))

    def forward(self, src: Tensor, pos: Tensor | None, key_padding_mask: Tensor | None) -> Tensor:
        for layer in self.layers:
            src = layer(src, pos, key_padding_mask)
        return src


class Decoder(nn.Module):
    """Stack of decoder layers returning every layer's output passed through the shared ``norm``: ``[L, B, K, D]``."""

    def __init__(self, layer_args: tuple[int, int, int, float], num_layers: int):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(*layer_args) for _ in range(num_layers))
        self.norm = nn.LayerNorm(layer_args[0])

    def forward(self, tgt: Tensor, memory: Tensor, pos: Tensor | None, query_pos: Tensor | None,
                tgt_key_padding_mask: Tensor | None, memory_key_padding_mask: Tensor | None) -> Tensor:
        outs = []
        for layer in self.layers:
            tgt = layer(tgt, memory, pos, query_pos, tgt_key_padding_mask, memory_key_padding_mask)
            outs.append(self.norm(tgt))
        return torch.stack(outs)


@dataclass
class NasvaOutput:
    """Model outputs. ``text_emb`` ``[L, B, K, d]`` and ``visual_emb`` ``[B, T, d]`` are unit vectors."""

    text_emb: Tensor
    visual_emb: Tensor
    alignable_logits: Tensor | None = None

    def similarities(self) -> Tensor:
        """A^l for every decoder layer: ``[L, B, K, T]`` cosines (Li et al., ECCV 2024, §3.2)."""
        return torch.einsum("lbkd,btd->lbkt", self.text_emb, self.visual_emb)

    def similarity(self) -> Tensor:
        """A = A^L, the model output: ``[B, K, T]``."""
        return torch.einsum("bkd,btd->bkt", self.text_emb[-1], self.visual_emb)


class NaSVA(nn.Module):
    """Narrations/Steps-to-Video Aligner (Li et al., ECCV 2024, §3.2)."""

    def __init__(self, cfg: NasvaModelConfig | None = None):
        super().__init__()
        cfg = cfg or NasvaModelConfig()
        self.cfg = cfg
        d = cfg.d_model
        self.visual_proj = nn.Sequential(nn.Linear(cfg.d_visual_in, d), nn.LayerNorm(d))
        self.visual_pos_enc = PositionalEncoding(d, cfg.max_visual_pe)
        self.text_proj = nn.Sequential(nn.Linear(cfg.d_text_in, d), nn.LayerNorm(d))
        self.v_sim_proj = nn.Linear(d, cfg.d_proj)
        self.t_sim_proj = nn.Linear(d, cfg.d_proj)
        layer_args = (d, cfg.nhead, cfg.dim_feedforward, cfg.dropout)
        self.visual_encoder = Encoder(layer_args, cfg.enc_layers)
        self.text_pos_enc = nn.Embedding(cfg.max_text_pe, d)
        self.decoder = Decoder(layer_args, cfg.dec_layers)
        self.alignable_head = nn.Linear(d, 2) if cfg.alignable_head else None
        self.apply(_init_weights)

    def forward(self, visual: Tensor, visual_padding_mask: Tensor | None, text: Tensor,
                text_padding_mask: Tensor | None, narration: bool | Tensor) -> NasvaOutput:
        """``visual`` ``[B, T, C_v]``, ``text`` ``[B, K, C_t]``; padding masks True on padded rows.

        ``narration``: the type token (Li et al., ECCV 2024, §3.2): True = ``<narration>`` (learned text PE added to the
        decoder's queries and keys), False = ``<step>`` (no text PE); a ``[B]`` bool tensor sets it per sample.
        """
        B, T, _ = visual.shape
        K = text.shape[1]
        if T > self.cfg.max_visual_pe:
            raise ValueError(f"{T} frames exceed the visual PE table ({self.cfg.max_visual_pe}); truncate the video")
        narr = torch.as_tensor(narration, dtype=torch.bool, device=visual.device)
        query_pos = None
        if bool(narr.any()):
            if K > self.cfg.max_text_pe:
                raise ValueError(f"{K} texts exceed the text PE table ({self.cfg.max_text_pe}) in <narration> mode")
            query_pos = self.text_pos_enc.weight[:K][None]
            if narr.dim() > 0:  # per-sample mode: zero the PE of <step> samples
                query_pos = query_pos * narr.to(query_pos.dtype).reshape(B, 1, 1)
        pos = self.visual_pos_enc.pe[:, :T]
        memory = self.visual_encoder(self.visual_proj(visual), pos, visual_padding_mask)
        outs = self.decoder(self.text_proj(text), memory, pos, query_pos, text_padding_mask, visual_padding_mask)
        z_v = F.normalize(self.v_sim_proj(memory), dim=-1)
        z_t = F.normalize(self.t_sim_proj(outs), dim=-1)
        logits = self.alignable_head(outs[-1]) if self.alignable_head is not None else None
        return NasvaOutput(text_emb=z_t, visual_emb=z_v, alignable_logits=logits)


def _init_weights(m: nn.Module) -> None:
    """Official initialisation (the authors' code, ``Lzq5/Video-Text-Alignment``): Linear (attention ``out_proj``
    included) and Embedding weights ~ trunc_normal(0, 0.02), biases 0; LayerNorm 1/0; ``in_proj_weight`` keeps PyTorch's
    Xavier-uniform default."""
    if isinstance(m, nn.Linear):
        nn.init.trunc_normal_(m.weight, mean=0.0, std=0.02)
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.LayerNorm):
        nn.init.ones_(m.weight)
        nn.init.zeros_(m.bias)
    elif isinstance(m, nn.Embedding):
        nn.init.trunc_normal_(m.weight, mean=0.0, std=0.02)


#: keys of the official model that this implementation does not have: ignored and reported
UNUSED_OFFICIAL_PREFIXES = ("timestamp_head.",)


def adapt_state_dict(sd: Mapping[str, Any]) -> tuple[dict[str, Tensor], list[str]]:
    """Accept our flat state dict or the official ``{"epoch", "model_state_dict"}`` layout (DataParallel ``module.``
    prefixes stripped); return (state dict, ignored keys). Nothing but tensors is accepted."""
    if "model_state_dict" in sd and isinstance(sd["model_state_dict"], Mapping):
        sd = sd["model_state_dict"]
    out: dict[str, Tensor] = {}
    ignored: list[str] = []
    for k, v in sd.items():
        name = k.removeprefix("module.")
        if name.startswith(UNUSED_OFFICIAL_PREFIXES):
            ignored.append(name)
            continue
        if not isinstance(v, Tensor):
            raise TypeError(f"checkpoint entry {k!r} is not a tensor")
        out[name] = v
    return out, ignored


def infer_config_from_state_dict(sd: Mapping[str, Tensor]) -> NasvaModelConfig:
    """Architecture sizes read from a state dict (for official checkpoints, which ship no config)."""
    enc = {int(k.split(".")[2]) for k in sd if k.startswith("visual_encoder.layers.")}
    dec = {int(k.split(".")[2]) for k in sd if k.startswith("decoder.layers.")}
    return NasvaModelConfig(
        d_visual_in=int(sd["visual_proj.0.weight"].shape[1]), d_text_in=int(sd["text_proj.0.weight"].shape[1]),
        d_model=int(sd["visual_proj.0.weight"].shape[0]), d_proj=int(sd["v_sim_proj.weight"].shape[0]),
        enc_layers=len(enc), dec_layers=len(dec),
        dim_feedforward=int(sd["visual_encoder.layers.0.linear1.weight"].shape[0]),
        max_text_pe=int(sd["text_pos_enc.weight"].shape[0]),
        max_visual_pe=int(sd["visual_pos_enc.pe"].shape[1]) if "visual_pos_enc.pe" in sd else 5000,
        alignable_head="alignable_head.weight" in sd)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
