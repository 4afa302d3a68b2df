"""builders.nasva.model: architecture, parameter names, initialisation, PE, shapes and padding masks (nasva.md §3)."""

from __future__ import annotations

import math

import pytest
import torch

from builders.nasva.checkpoint import load_checkpoint
from builders.nasva.model import (
    NaSVA,
    NasvaModelConfig,
    adapt_state_dict,
    count_parameters,
    sinusoidal_table,
)

from .toy import TINY


@pytest.fixture(autouse=True, scope="module")
def _torch_threads():
    """2 torch thread(s) for this module, restored afterwards: a module-level set_num_threads would change the
    thread count (and so float reductions) of every later test in the session, e.g. the Ray-vs-local identity test."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def paper_model() -> NaSVA:
    torch.manual_seed(0)
    return NaSVA(NasvaModelConfig(d_visual_in=768, d_text_in=768))


def test_sinusoidal_pe_values():
    pe = sinusoidal_table(5000, 256)
    assert pe.shape == (1, 5000, 256)
    assert pe[0, 0, 0] == 0.0 and pe[0, 0, 1] == 1.0
    assert pe[0, 1, 0].item() == pytest.approx(0.8414709848, abs=1e-6)  # sin(1)
    assert pe[0, 1, 1].item() == pytest.approx(0.5403023059, abs=1e-6)  # cos(1)
    # pe[p, 2i] = sin(p / 10000^(2i/256)), pe[p, 2i+1] = cos(same)
    for p, i in [(2, 1), (37, 5), (1199, 64), (4999, 127)]:
        angle = p / 10000 ** (2 * i / 256)
        assert pe[0, p, 2 * i].item() == pytest.approx(math.sin(angle), abs=2e-4)
        assert pe[0, p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=2e-4)
    assert pe[0, 100, 255].item() == pytest.approx(math.cos(100 / 10000 ** (254 / 256)), abs=1e-5)


def test_parameter_names_follow_the_official_model(paper_model):
    sd = paper_model.state_dict()
    for key in ["visual_proj.0.weight", "visual_proj.1.bias", "text_proj.0.weight", "text_proj.1.weight",
                "visual_pos_enc.pe", "text_pos_enc.weight", "v_sim_proj.weight", "t_sim_proj.bias",
                "visual_encoder.layers.2.self_attn.in_proj_weight", "visual_encoder.layers.0.self_attn.out_proj.weight",
                "visual_encoder.layers.1.linear1.weight", "visual_encoder.layers.1.norm2.bias",
                "decoder.layers.2.multihead_attn.in_proj_bias", "decoder.layers.0.self_attn.out_proj.bias",
                "decoder.layers.1.norm3.weight", "decoder.norm.weight", "alignable_head.weight"]:
        assert key in sd, key
    assert "visual_encoder.layers.3.linear1.weight" not in sd and "decoder.layers.3.norm1.weight" not in sd
    assert "visual_encoder.norm.weight" not in sd  # no final encoder norm
    assert sd["visual_pos_enc.pe"].shape == (1, 5000, 256)
    assert "visual_pos_enc.pe" not in dict(paper_model.named_parameters())  # a buffer, not trained
    assert sd["text_pos_enc.weight"].shape == (1024, 256)
    assert sd["visual_encoder.layers.0.linear1.weight"].shape == (2048, 256)
    assert sd["v_sim_proj.weight"].shape == (64, 256) and sd["alignable_head.weight"].shape == (2, 256)
    assert len(sd) == 108
    # ≈ 9.4 M at C_v = C_t = 768 (nasva.md §3): hand count 9,372,290; with 384-d text 384·256 fewer
    assert count_parameters(paper_model) == 9_372_290
    assert count_parameters(NaSVA(NasvaModelConfig(d_visual_in=768, d_text_in=384))) == 9_372_290 - 384 * 256


def test_initialisation(paper_model):
    p = dict(paper_model.named_parameters())
    for name in ["visual_proj.0.weight", "visual_encoder.layers.0.linear1.weight", "decoder.layers.1.linear2.weight",
                 "decoder.layers.0.multihead_attn.out_proj.weight", "v_sim_proj.weight", "text_pos_enc.weight"]:
        assert p[name].std().item() == pytest.approx(0.02, rel=0.05), name
        assert p[name].mean().abs().item() < 2e-3
    bound = math.sqrt(6 / (256 + 3 * 256))  # Xavier uniform of the [768, 256] in_proj_weight (PyTorch default)
    w = p["visual_encoder.layers.1.self_attn.in_proj_weight"]
    assert w.abs().max().item() <= bound and w.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.05)
    for name, t in p.items():
        if name.endswith("bias"):
            assert torch.count_nonzero(t) == 0, name
        if ".norm" in name and name.endswith("weight") or name in ("visual_proj.1.weight", "text_proj.1.weight"):
            assert torch.all(t == 1), name


def _two_videos(Tc=(5, 9), Kc=(2, 4), cv=12, ct=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    vis = [torch.randn(T, cv, generator=g) for T in Tc]
    txt = [torch.randn(K, ct, generator=g) for K in Kc]
    return vis, txt


def _pad(seqs, n, fill):
    out = torch.stack([torch.cat([s, fill(n - s.shape[0], s)]) for s in seqs])
    mask = torch.stack([torch.arange(n) >= s.shape[0] for s in seqs])
    return out, mask


@pytest.mark.parametrize("narration", [True, False])
def test_shapes_ranges_and_padding_invariance(narration):
    torch.manual_seed(1)
    model = NaSVA(NasvaModelConfig(d_visual_in=12, d_text_in=10, **TINY)).eval()
    vis, txt = _two_videos()
    singles = []
    with torch.no_grad():
        for v, t in zip(vis, txt):
            out = model(v[None], None, t[None], None, narration)
            singles.append(out)
        # padding with garbage values (not a repeat of the last row) must not change the non-padded outputs
        V, vpad = _pad(vis, 11, lambda n, s: 100 * torch.randn(n, s.shape[1]))
        X, tpad = _pad(txt, 6, lambda n, s: 100 * torch.randn(n, s.shape[1]))
        out = model(V, vpad, X, tpad, narration)
    L = TINY["dec_layers"]
    assert out.text_emb.shape == (L, 2, 6, 16) and out.visual_emb.shape == (2, 11, 16)
    assert out.alignable_logits.shape == (2, 6, 2)
    assert torch.allclose(out.visual_emb.norm(dim=-1), torch.ones(2, 11), atol=1e-5)
    A_all = out.similarities()
    assert A_all.shape == (L, 2, 6, 11) and A_all.abs().max() <= 1 + 1e-5
    for b, single in enumerate(singles):
        T, K = vis[b].shape[0], txt[b].shape[0]
        torch.testing.assert_close(A_all[:, b, :K, :T], single.similarities()[:, 0], atol=1e-5, rtol=0)
        torch.testing.assert_close(out.visual_emb[b, :T], single.visual_emb[0], atol=1e-5, rtol=0)


def test_step_mode_is_permutation_equivariant_and_narration_mode_is_not():
    torch.manual_seed(2)
    model = NaSVA(NasvaModelConfig(d_visual_in=12, d_text_in=10, **TINY)).eval()
    v, t = _two_videos(Tc=(7,), Kc=(5,))
    perm = torch.tensor([3, 0, 4, 1, 2])
    with torch.no_grad():
        A = model(v[0][None], None, t[0][None], None, False).similarity()[0]
        Ap = model(v[0][None], None, t[0][perm][None], None, False).similarity()[0]
        N = model(v[0][None], None, t[0][None], None, True).similarity()[0]
        Np = model(v[0][None], None, t[0][perm][None], None, True).similarity()[0]
    torch.testing.assert_close(Ap, A[perm], atol=1e-5, rtol=0)
    assert not torch.allclose(Np, N[perm], atol=1e-4)  # the learned text PE makes order matter
    assert not torch.allclose(N, A, atol=1e-4)


def test_per_sample_type_token_equals_separate_runs():
    torch.manual_seed(3)
    model = NaSVA(NasvaModelConfig(d_visual_in=12, d_text_in=10, **TINY)).eval()
    vis, txt = _two_videos(Tc=(6, 6), Kc=(3, 3))
    V, X = torch.stack(vis), torch.stack(txt)
    with torch.no_grad():
        mixed = model(V, None, X, None, torch.tensor([True, False])).similarity()
        a = model(V[:1], None, X[:1], None, True).similarity()
        b = model(V[1:], None, X[1:], None, False).similarity()
    torch.testing.assert_close(mixed, torch.cat([a, b]), atol=1e-5, rtol=0)


def test_limits_of_the_pe_tables():
    model = NaSVA(NasvaModelConfig(d_visual_in=4, d_text_in=4, max_text_pe=3, max_visual_pe=8, **TINY)).eval()
    with torch.no_grad():
        with pytest.raises(ValueError, match="text PE"):
            model(torch.randn(1, 5, 4), None, torch.randn(1, 4, 4), None, True)
        model(torch.randn(1, 5, 4), None, torch.randn(1, 4, 4), None, False)  # <step> mode has no text PE
        with pytest.raises(ValueError, match="visual PE"):
            model(torch.randn(1, 9, 4), None, torch.randn(1, 2, 4), None, False)


def test_official_checkpoint_layout_loads(tmp_path):
    torch.manual_seed(4)
    model = NaSVA(NasvaModelConfig(d_visual_in=768, d_text_in=768))
    sd = {f"module.{k}": v for k, v in model.state_dict().items()}
    sd["module.timestamp_head.0.layers.0.weight"] = torch.zeros(128, 256)
    torch.save({"epoch": 12, "model_state_dict": sd}, tmp_path / "epoch-12.pth")
    loaded, config, ignored = load_checkpoint(tmp_path / "epoch-12.pth")
    assert ignored == ["timestamp_head.0.layers.0.weight"]
    assert config["d_visual_in"] == 768 and config["enc_layers"] == 3 and config["dec_layers"] == 3
    for k, v in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], v), k
    with pytest.raises(TypeError, match="not a tensor"):
        adapt_state_dict({"visual_proj.0.weight": [1, 2]})
