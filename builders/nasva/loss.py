"""Training losses of the grounding model (Li et al., ECCV 2024, §3.3; the authors' code,
``Lzq5/Video-Text-Alignment``; TAN: Han et al., CVPR 2022).

NaSVA (default): text→video InfoNCE / MIL-NCE variant. For every decoder layer l the logits are
G^l = Z_t^l · Z_vᵀ / τ over all B·K texts × B·T frames of the batch (``negatives="batch"``, the released code);
positives are the frames of the text's own video inside its window (``start <= t <= end``, raw float seconds,
end-inclusive); padded frames leave numerator and denominator; rows without a positive give 0 but count in the mean;
the loss is the mean over decoder layers. ``negatives="video"`` restricts the denominator to the text's own video
(the paper's equation, Li et al., ECCV 2024, §3.3).

TAN (option ``loss="tan"``): the symmetric loss of TemporalAlignNet (Han et al., CVPR 2022): a text→video term per text
and a video→text term per frame, each averaged over the rows that have a positive, then (v + t)/2; with TAN's own
end-exclusive target rule (``rule="tan"``).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from .model import NasvaOutput

#: fill value of masked logits before ``logsumexp`` (official, fp16-safe; exp(-6e4) == 0 in any float type)
NEG_FILL = -6e4

Rule = Literal["nasva", "tan"]
Negatives = Literal["batch", "video"]


def time_mask(start: Tensor, end: Tensor, T: int, rule: Rule = "nasva") -> Tensor:
    """``[K, T]`` target mask from per-text float seconds (end-inclusive, as the authors' code).

    ``rule="nasva"``: ``start <= t <= end`` (end-inclusive, official ``create_target_similarity``);
    ``rule="tan"``: ``start <= t < end`` (end-exclusive, TAN ``get_mask_from_time``). t = 0..T-1.
    """
    t = torch.arange(T, dtype=torch.float64, device=start.device)[None, :]
    s = start.to(torch.float64)[:, None]
    e = end.to(torch.float64)[:, None]
    if rule == "nasva":
        return (s <= t) & (t <= e)
    if rule == "tan":
        return (s <= t) & (t < e)
    raise ValueError(f"unknown target rule {rule!r} (nasva|tan)")


def info_nce_rows(logits: Tensor, pos: Tensor, valid: Tensor) -> Tensor:
    """Per-row loss ℓ_i = −(logsumexp_{j∈pos(i)} G[i,j] − logsumexp_{j valid} G[i,j]); 0 for rows without a positive.

    ``logits`` ``[..., N, M]`` (already divided by τ), ``pos`` and ``valid`` bool, broadcastable to it. A positive
    must also be valid. Returns ``[..., N]``.
    """
    pos = pos & valid
    num = torch.logsumexp(logits.masked_fill(~pos, NEG_FILL), dim=-1)
    den = torch.logsumexp(logits.masked_fill(~valid, NEG_FILL), dim=-1)
    has_pos = pos.any(dim=-1)
    return torch.where(has_pos, den - num, torch.zeros_like(num))


def batch_targets(time_mask_b: Tensor, visual_padding_mask: Tensor | None, text_padding_mask: Tensor | None,
                  negatives: Negatives = "batch") -> tuple[Tensor, Tensor]:
    """Positive and valid-column masks over the flattened batch, ``[B·K, B·T]`` each.

    ``time_mask_b`` ``[B, K, T]``; frame (c, t) is a positive of text (b, k) iff c == b and the mask is true there, the
    frame is not padding and the text is not padding. Valid columns: non-padded frames (of every video for
    ``negatives="batch"``, of the text's own video for ``"video"``).
    """
    B, K, T = time_mask_b.shape
    dev = time_mask_b.device
    vpad = visual_padding_mask if visual_padding_mask is not None else torch.zeros(B, T, dtype=torch.bool, device=dev)
    tpad = text_padding_mask if text_padding_mask is not None else torch.zeros(B, K, dtype=torch.bool, device=dev)
    same = torch.eye(B, dtype=torch.bool, device=dev)  # [b, c]
    frame_ok = ~vpad  # [c, t]
    pos = (same[:, None, :, None] & time_mask_b[:, :, None, :] & frame_ok[None, None]
           & ~tpad[:, :, None, None])  # [b, k, c, t]
    if negatives == "batch":
        valid = frame_ok[None, None].expand(B, K, B, T)
    elif negatives == "video":
        valid = same[:, None, :, None] & frame_ok[None, None]
        valid = valid.expand(B, K, B, T)
    else:
        raise ValueError(f"unknown negatives {negatives!r} (batch|video)")
    return pos.reshape(B * K, B * T), valid.reshape(B * K, B * T)


def nasva_loss(out: NasvaOutput, time_mask_b: Tensor, visual_padding_mask: Tensor | None,
               text_padding_mask: Tensor | None, temperature: float = 0.07,
               negatives: Negatives = "batch") -> Tensor:
    """NaSVA ``SimilarityLoss`` averaged over decoder layers (Li et al., ECCV 2024, §3.3; the authors' code).

    The mean runs over all B·K text rows, padded texts and texts without a positive frame included.
    """
    L, B, K, d = out.text_emb.shape
    T = out.visual_emb.shape[1]
    logits = torch.einsum("lnd,md->lnm", out.text_emb.reshape(L, B * K, d),
                          out.visual_emb.reshape(B * T, d)) / temperature  # [L, B·K, B·T]
    pos, valid = batch_targets(time_mask_b, visual_padding_mask, text_padding_mask, negatives)
    return info_nce_rows(logits, pos[None], valid[None]).mean(dim=-1).mean()


def tan_loss_from_logits(logits: Tensor, pos: Tensor, valid: Tensor) -> Tensor:
    """TAN's symmetric loss on ``[N_text, M_frame]`` logits (Han et al., CVPR 2022): t-term over text rows with a
    positive, v-term over frame columns with a positive (softmax over the valid texts), each a mean over such rows; (v +
    t)/2.

    ``valid`` marks valid (text, frame) cells: a padded text or padded frame is invalid in both directions.
    """
    pos = pos & valid
    t_rows = info_nce_rows(logits, pos, valid)
    t_has = pos.any(-1)
    v_rows = info_nce_rows(logits.transpose(-1, -2), pos.transpose(-1, -2), valid.transpose(-1, -2))
    v_has = pos.any(-2)
    t_term = t_rows.sum(-1) / t_has.sum(-1).clamp(min=1)
    v_term = v_rows.sum(-1) / v_has.sum(-1).clamp(min=1)
    return (t_term + v_term) / 2


def tan_loss(out: NasvaOutput, time_mask_b: Tensor, visual_padding_mask: Tensor | None,
             text_padding_mask: Tensor | None, temperature: float = 0.07) -> Tensor:
    """TAN-style symmetric loss (cross-video negatives in both directions), averaged over decoder layers."""
    L, B, K, d = out.text_emb.shape
    T = out.visual_emb.shape[1]
    logits = torch.einsum("lnd,md->lnm", out.text_emb.reshape(L, B * K, d),
                          out.visual_emb.reshape(B * T, d)) / temperature
    pos, valid = batch_targets(time_mask_b, visual_padding_mask, text_padding_mask, "batch")
    if text_padding_mask is not None:
        valid = valid & ~text_padding_mask.reshape(B * K, 1)
    return tan_loss_from_logits(logits, pos[None], valid[None]).mean()


def grounding_loss(kind: str, out: NasvaOutput, time_mask_b: Tensor, visual_padding_mask: Tensor | None,
                   text_padding_mask: Tensor | None, temperature: float = 0.07,
                   negatives: Negatives = "batch") -> Tensor:
    """Dispatch on the trainer's ``loss`` setting: ``nasva`` (default) or ``tan``."""
    if kind == "nasva":
        return nasva_loss(out, time_mask_b, visual_padding_mask, text_padding_mask, temperature, negatives)
    if kind == "tan":
        return tan_loss(out, time_mask_b, visual_padding_mask, text_padding_mask, temperature)
    raise ValueError(f"unknown loss {kind!r} (nasva|tan)")
