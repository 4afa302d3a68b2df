"""builders.nasva.loss: NaSVA InfoNCE (nasva.md §5) and TAN's loss on evaluation.md §9 example G, targets, padding."""

from __future__ import annotations

import math

import pytest
import torch

from builders.nasva.loss import (
    batch_targets,
    grounding_loss,
    info_nce_rows,
    nasva_loss,
    tan_loss,
    tan_loss_from_logits,
    time_mask,
)
from builders.nasva.model import NasvaOutput

E = math.e
# evaluation.md §9 example G, by hand: text0 row [1,0,0] positives t∈{0,1}; text1 row [0,0,2] positive t=2
ROW0 = math.log((E + 2) / (E + 1))  # 0.238183
ROW1 = math.log((2 + E ** 2) / E ** 2)  # 0.239545
NASVA_G = (ROW0 + ROW1) / 2  # 0.238864
V_DIR = (math.log(1 + 1 / E) + math.log(2) + math.log(1 + E ** -2)) / 3  # 0.37778
TAN_G = (NASVA_G + V_DIR) / 2  # 0.30832

G = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 2.0]])
POS = torch.tensor([[True, True, False], [False, False, True]])


def test_hand_values_match_the_spec():
    assert ROW0 == pytest.approx(0.238183, abs=1e-6) and ROW1 == pytest.approx(0.239545, abs=1e-6)
    assert NASVA_G == pytest.approx(0.23886, abs=1e-5) and TAN_G == pytest.approx(0.30832, abs=1e-5)


def test_example_g_rows_and_mean():
    rows = info_nce_rows(G, POS, torch.ones(2, 3, dtype=torch.bool))
    torch.testing.assert_close(rows, torch.tensor([ROW0, ROW1]), atol=1e-6, rtol=0)
    assert rows.mean().item() == pytest.approx(0.238864, abs=1e-5)


def test_row_without_positive_counts_in_the_mean():
    G3 = torch.cat([G, torch.tensor([[0.0, 0.0, 2.0]])])
    pos3 = torch.cat([POS, torch.zeros(1, 3, dtype=torch.bool)])
    loss = info_nce_rows(G3, pos3, torch.ones(3, 3, dtype=torch.bool)).mean()
    assert loss.item() == pytest.approx((ROW0 + ROW1) / 3, abs=1e-6)
    assert loss.item() == pytest.approx(0.159243, abs=1e-5)


def test_tan_variant_example_g():
    # TAN's v-direction runs over frame rows (texts as columns): the same matrix transposed
    assert tan_loss_from_logits(G, POS, torch.ones(2, 3, dtype=torch.bool)).item() == pytest.approx(0.30832, abs=1e-5)


def _embeddings_for_g(extra_frames: int = 0, pad_like_text: bool = False):
    """Unit vectors whose cosines / 0.07 are example G's logits: frames e1,e2,e3; text0 = .07e1 + c0 e4,
    text1 = .14e3 + c1 e5 (6-d space). Extra frames are padding: identical to text1 to tempt the loss."""
    t0 = torch.tensor([0.07, 0, 0, math.sqrt(1 - 0.07 ** 2), 0, 0])
    t1 = torch.tensor([0, 0, 0.14, 0, math.sqrt(1 - 0.14 ** 2), 0])
    frames = [torch.eye(6)[i] for i in range(3)] + [t1.clone() if pad_like_text else torch.eye(6)[5]] * extra_frames
    L = 3  # the same text embeddings for each of three decoder layers: the mean over layers equals one layer
    text = torch.stack([t0, t1])[None, None].expand(L, 1, 2, 6)
    return NasvaOutput(text_emb=text, visual_emb=torch.stack(frames)[None])


def test_nasva_loss_on_example_g_through_embeddings():
    out = _embeddings_for_g()
    tm = time_mask(torch.tensor([0.0, 2.0]), torch.tensor([1.0, 2.0]), 3)[None]
    assert nasva_loss(out, tm, None, None, temperature=0.07).item() == pytest.approx(0.238864, abs=1e-5)
    assert grounding_loss("tan", out, time_mask(torch.tensor([0.0, 2.0]), torch.tensor([2.0, 3.0]), 3, "tan")[None],
                          None, None).item() == pytest.approx(0.30832, abs=1e-5)


def test_padded_frames_are_ignored():
    out = _embeddings_for_g(extra_frames=2, pad_like_text=True)  # pads would be the best match of text1
    tm = torch.zeros(1, 2, 5, dtype=torch.bool)
    tm[0, :, :3] = time_mask(torch.tensor([0.0, 2.0]), torch.tensor([1.0, 2.0]), 3)
    tm[0, 1, 3:] = True  # even a (wrong) positive on a padded frame must not count
    vpad = torch.tensor([[False, False, False, True, True]])
    assert nasva_loss(out, tm, vpad, None).item() == pytest.approx(0.238864, abs=1e-5)
    assert nasva_loss(out, tm, None, None).item() != pytest.approx(0.238864, abs=1e-3)  # without the mask it differs
    assert tan_loss(out, tm, vpad, None).item() == pytest.approx(TAN_G, abs=1e-5)  # same positives as example G


def test_padded_texts_contribute_zero_but_count():
    base = _embeddings_for_g()
    text = torch.cat([base.text_emb, base.text_emb[:, :, 1:]], dim=2)  # third text = a repeat of the last (padding)
    out = NasvaOutput(text_emb=text, visual_emb=base.visual_emb)
    tm = time_mask(torch.tensor([0.0, 2.0, 2.0]), torch.tensor([1.0, 2.0, 2.0]), 3)[None]
    tpad = torch.tensor([[False, False, True]])
    assert nasva_loss(out, tm, None, tpad).item() == pytest.approx(0.159243, abs=1e-5)


def test_end_inclusive_targets_on_raw_seconds():
    tm = time_mask(torch.tensor([0.0, 2.0, 3.2, 1.2, 0.5]), torch.tensor([1.0, 2.0, 3.9, 3.6, 5.0]), 5)
    expected = torch.tensor([[1, 1, 0, 0, 0],   # [0, 1]: end second included
                             [0, 0, 1, 0, 0],   # [2, 2]: a single frame
                             [0, 0, 0, 0, 0],   # [3.2, 3.9]: no integer second, no positive
                             [0, 0, 1, 1, 0],   # [1.2, 3.6] -> {2, 3} (raw floats, no floor/ceil)
                             [0, 1, 1, 1, 1]]).bool()  # end past the video: clipped by T
    assert torch.equal(tm, expected)
    tan = time_mask(torch.tensor([0.0, 2.0]), torch.tensor([2.0, 3.0]), 3, rule="tan")
    assert torch.equal(tan, torch.tensor([[1, 1, 0], [0, 0, 1]]).bool())  # TAN: end exclusive


def test_cross_video_negatives():
    # two videos of one frame and one text each; text b scores a with its own frame and c with the other video's
    a, c = 0.5, 0.2
    t0 = torch.tensor([a, c])
    t1 = torch.tensor([0.0, 1.0])  # text1 matches its own frame exactly
    out = NasvaOutput(text_emb=torch.stack([t0, t1])[None, :, None, :], visual_emb=torch.eye(2)[:, None, :])
    tm = torch.ones(2, 1, 1, dtype=torch.bool)
    tau = 0.07
    l0 = math.log(1 + math.exp((c - a) / tau))  # text0: own frame vs video1's frame
    l1 = math.log(1 + math.exp((0 - 1) / tau))  # text1: own frame (1) vs video0's frame (0)
    assert nasva_loss(out, tm, None, None, tau, "batch").item() == pytest.approx((l0 + l1) / 2, abs=1e-6)
    assert nasva_loss(out, tm, None, None, tau, "video").item() == pytest.approx(0.0, abs=1e-7)
    pos, valid = batch_targets(tm, None, None, "video")
    assert torch.equal(pos, torch.eye(2, dtype=torch.bool)) and torch.equal(valid, torch.eye(2, dtype=torch.bool))


def test_gradients_are_finite_with_empty_rows():
    text = torch.randn(3, 2, 4, 8, requires_grad=True)
    vis = torch.randn(2, 5, 8, requires_grad=True)
    out = NasvaOutput(text_emb=torch.nn.functional.normalize(text, dim=-1),
                      visual_emb=torch.nn.functional.normalize(vis, dim=-1))
    tm = torch.zeros(2, 4, 5, dtype=torch.bool)
    tm[0, 0, 1:3] = True  # one positive row in the whole batch
    vpad = torch.tensor([[False] * 5, [False, False, True, True, True]])
    tpad = torch.tensor([[False, False, True, True], [False, True, True, True]])
    loss = nasva_loss(out, tm, vpad, tpad)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(text.grad).all() and torch.isfinite(vis.grad).all()
    with pytest.raises(ValueError):
        grounding_loss("other", out, tm, vpad, tpad)
