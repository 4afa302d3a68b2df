"""ShowHowTo generation metrics as pure functions (``../shared/specs/showhowto.md`` §11 worked values, ties, class
sets, and FID against an independent eigenvalue formula)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from eval.metrics.generation import (
    cosine_similarity,
    frechet_distance,
    frechet_distance_from_features,
    gaussian_statistics,
    l2_normalize,
    masked_first_argmax,
    scene_consistency,
    step_faithfulness,
    task_faithfulness,
)


# spec §11 SF: similarity rows (image i over prompts j = 1..n) of two sequences
SF_ROWS = [np.array([[.30, .20, .10], [.25, .22, .28], [.10, .15, .31]]), np.array([[.20, .10], [.30, .35]])]


def sf_features(rows: list[np.ndarray], input_sims: list[np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Features whose cosines order like ``rows``: prompt τ_j = basis vector, image i = its similarity row.

    Cosine = row / ||row|| (a positive scale), so every argmax equals the argmax of the given row. τ_0 gets its
    own basis vector with the similarities ``input_sims[s]`` (zero when not given).
    """
    dim = sum(r.shape[1] + 1 for r in rows)
    gen, gseq, gstep, prm, pseq, pstep = [], [], [], [], [], []
    off = 0
    for s, r in enumerate(rows):
        n = r.shape[1]
        for j in range(n + 1):  # column off + j holds τ_j
            e = np.zeros(dim)
            e[off + j] = 1.0
            prm.append(e)
            pseq.append(s)
            pstep.append(j)
        for i in range(n):
            x = np.zeros(dim)
            x[off + 1: off + 1 + n] = r[i]
            if input_sims is not None:
                x[off] = input_sims[s][i]
            gen.append(x)
            gseq.append(s)
            gstep.append(i + 1)
        off += n + 1
    return {"gen": np.array(gen), "gen_seq": np.array(gseq), "gen_step": np.array(gstep), "prompts": np.array(prm),
            "prompt_seq": np.array(pseq), "prompt_step": np.array(pstep),
            "n_steps": np.array([r.shape[1] for r in rows])}


def test_sf_worked_values_per_sequence_and_pooled() -> None:
    f = sf_features(SF_ROWS)
    res = step_faithfulness(**f)
    assert res.value == pytest.approx(0.833333, abs=1e-6)
    assert res.per_sequence == pytest.approx([2 / 3, 1.0])
    assert (res.hits, res.total) == (4, 5)
    assert step_faithfulness(**f, pooled=True).value == pytest.approx(0.8)


def test_sf_with_the_input_prompt_as_a_class() -> None:
    # τ_0 wins image 1 of sequence 1 (0.35 > 0.30) and image 2 of sequence 2 (0.40 > 0.35)
    f = sf_features(SF_ROWS, input_sims=[np.array([.35, .0, .0]), np.array([.0, .40])])
    assert step_faithfulness(**f).value == pytest.approx(0.833333, abs=1e-6)  # τ_0 is not a class by default
    res = step_faithfulness(**f, include_input=True)
    assert res.per_sequence == pytest.approx([1 / 3, 1 / 2])
    assert res.value == pytest.approx(5 / 12)


def test_sf_ties_go_to_the_lowest_step_and_missing_images_are_misses() -> None:
    rows = [np.array([[.5, .5], [.5, .5]])]  # image 1 ties τ_1/τ_2 -> τ_1 (hit); image 2 ties -> τ_1 (miss)
    f = sf_features(rows)
    assert step_faithfulness(**f).value == pytest.approx(0.5)
    # drop image 1: one present image of n = 2 (a miss) -> 0.0, the denominator stays n
    keep = f["gen_step"] != 1
    g = dict(f, gen=f["gen"][keep], gen_seq=f["gen_seq"][keep], gen_step=f["gen_step"][keep])
    res = step_faithfulness(**g)
    assert (res.value, res.hits, res.total) == (0.0, 0, 2)


def test_masked_first_argmax() -> None:
    s = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 9.0], [0.0, 0.0, 0.0]])
    valid = np.array([[True, True, True], [True, True, False], [False, False, False]])
    assert masked_first_argmax(s, valid).tolist() == [1, 0, -1]


def test_sc_worked_value() -> None:
    gallery = np.eye(3)  # frames of videos A, B, C
    gen = np.array([[.9, .1, 0], [.2, .7, .1], [.1, .8, .3], [.3, .6, .2]])
    res = scene_consistency(gen, np.array([0, 0, 1, 1]), gallery, np.array([0, 1, 2]), np.array([2, 2]))
    assert res.value == pytest.approx(0.75)
    assert res.per_sequence == pytest.approx([0.5, 1.0])
    pooled = scene_consistency(gen, np.array([0, 0, 1, 1]), gallery, np.array([0, 1, 2]), np.array([2, 2]),
                               pooled=True)
    assert pooled.value == pytest.approx(0.75)


def test_sc_ties_go_to_the_first_gallery_row() -> None:
    gallery = np.array([[1.0, 0.0], [1.0, 0.0]])  # same frame in videos 1 and 0: the first row (video 1) wins
    res = scene_consistency(np.array([[1.0, 0.0]]), np.array([0]), gallery, np.array([1, 0]), np.array([1]))
    assert res.value == 0.0
    res = scene_consistency(np.array([[1.0, 0.0]]), np.array([0]), gallery[::-1], np.array([0, 1]), np.array([1]))
    assert res.value == 1.0


def test_tf_worked_value() -> None:
    tasks = np.eye(3)
    gen = np.array([[.8, .6, 0], [.9, .1, 0], [0, .9, .1], [.1, .2, .9]])
    res = task_faithfulness(gen, np.array([0, 0, 1, 1]), 2, np.array([0, 2]), tasks)
    assert res.value == pytest.approx(0.5)
    assert res.per_sequence == pytest.approx([1.0, 0.0])
    # the spec's "mean of normalised features", before the final normalisation (which keeps the argmax)
    assert l2_normalize(gen[:2]).mean(axis=0) == pytest.approx([0.897, 0.355, 0.0], abs=1e-3)
    assert l2_normalize(gen[2:]).mean(axis=0) == pytest.approx([0.054, 0.605, 0.540], abs=1e-3)
    # no task (-1) leaves TF; a sequence with a task but no image is a miss
    res = task_faithfulness(gen[:2], np.array([0, 0]), 3, np.array([0, -1, 1]), tasks)
    assert res.per_sequence[1] != res.per_sequence[1]  # NaN
    assert res.value == pytest.approx(0.5) and res.total == 2


def test_cosine_and_normalisation() -> None:
    a = np.array([[3.0, 4.0], [0.0, 0.0]])
    assert l2_normalize(a) == pytest.approx(np.array([[0.6, 0.8], [0.0, 0.0]]))  # zero rows stay zero
    assert cosine_similarity(a, np.array([[1.0, 0.0]])) == pytest.approx(np.array([[0.6], [0.0]]))


def test_fid_worked_value() -> None:
    real = np.array([[0, 0], [2, 0], [0, 2], [2, 2]], float)
    gen = np.array([[1, 1], [5, 1], [1, 5], [5, 5]], float)
    mu, sigma = gaussian_statistics(real)
    assert mu == pytest.approx([1, 1]) and sigma == pytest.approx(4 / 3 * np.eye(2))
    assert frechet_distance_from_features(gen, real) == pytest.approx(10.6667, abs=1e-4)
    assert frechet_distance_from_features(gen, real) == pytest.approx(32 / 3)
    assert frechet_distance_from_features(real, real) == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError, match="at least 2"):
        gaussian_statistics(real[:1])


def _fid_by_eigenvalues(x: np.ndarray, y: np.ndarray) -> float:
    """Independent formula: Tr sqrt(S1 S2) = sum of sqrt(eigenvalues of S1^1/2 S2 S1^1/2) (symmetric PSD)."""
    mu1, mu2 = x.mean(0), y.mean(0)
    s1, s2 = np.cov(x, rowvar=False), np.cov(y, rowvar=False)
    w, v = np.linalg.eigh(s1)
    root1 = (v * np.sqrt(np.clip(w, 0, None))) @ v.T
    lam = np.linalg.eigvalsh(root1 @ s2 @ root1)
    return float(((mu1 - mu2) ** 2).sum() + np.trace(s1) + np.trace(s2) - 2 * np.sqrt(np.clip(lam, 0, None)).sum())


@pytest.mark.parametrize("seed", range(4))
def test_fid_matches_the_eigenvalue_formula_on_random_features(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 24))
    x = rng.standard_normal((int(rng.integers(d + 5, 80)), d)) @ rng.standard_normal((d, d))
    y = rng.standard_normal((int(rng.integers(d + 5, 80)), d)) * rng.uniform(0.5, 2, d) + rng.normal(0, 1, d)
    ours = frechet_distance_from_features(x, y)
    assert ours == pytest.approx(_fid_by_eigenvalues(x, y), rel=1e-6, abs=1e-6)
    assert frechet_distance_from_features(y, x) == pytest.approx(ours, rel=1e-6)


def test_fid_with_a_singular_product_stays_finite() -> None:
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((5, 12)), rng.standard_normal((6, 12)) + 1.0  # rank <= 5 covariances of 12-d
    fid = frechet_distance_from_features(x, y)
    assert np.isfinite(fid) and fid > 0
    assert fid == pytest.approx(_fid_by_eigenvalues(x, y), rel=1e-4)
    with pytest.raises(ValueError, match="shape"):
        frechet_distance(np.zeros(2), np.eye(2), np.zeros(3), np.eye(3))


def test_upstream_inference_example_as_a_metric_sequence(shared_data: Path) -> None:
    """The real fixture ``prompt_file.txt`` (image|τ_0|...|τ_7): its 7 target prompts as SF classes.

    Text features are hashed bags of words (deterministic, no model); generated image i gets the feature of τ_i
    plus noise for i odd and the feature of τ_{i+1} for i even (the wrong step) -> SF = 4/7 (i = 1, 3, 5, 7).
    """
    fixture = shared_data / "showhowto"
    line = next(ln for ln in (fixture / "prompt_file.txt").read_text(encoding="utf-8").splitlines()
                if ln.strip() and not ln.startswith("#"))
    image, *prompts = line.split("|")
    assert image.endswith("img01.jpg") and len(prompts) == 8 and (fixture / "img01.jpg").is_file()

    def bag(text: str) -> np.ndarray:
        v = np.zeros(64)
        for word in text.lower().replace(".", " ").replace(",", " ").split():
            v[sum(map(ord, word)) * 2654435761 % 64] += 1.0
        return v

    texts = np.array([bag(t) for t in prompts])
    n = len(prompts) - 1
    rng = np.random.default_rng(0)
    gen = np.array([texts[i] + 0.01 * rng.random(64) if i % 2 else texts[min(i + 1, n)] for i in range(1, n + 1)])
    res = step_faithfulness(gen, np.zeros(n, int), np.arange(1, n + 1), texts, np.zeros(n + 1, int),
                            np.arange(n + 1), np.array([n]))
    assert res.value == pytest.approx(4 / 7)


def test_fid_singular_product_and_imaginary_branches(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytorch-fid's rules: a non-finite root -> eps*I added to both covariances; imaginary diagonal > 1e-3 -> error."""
    from eval.metrics import generation

    real_sqrtm = generation._sqrtm
    calls: list[np.ndarray] = []

    def first_nan(m: np.ndarray) -> np.ndarray:
        calls.append(m)
        return np.full_like(m, np.nan) if len(calls) == 1 else real_sqrtm(m)

    s1, s2 = np.diag([1.0, 4.0]), np.diag([9.0, 0.0])
    monkeypatch.setattr(generation, "_sqrtm", first_nan)
    fid = frechet_distance(np.zeros(2), s1, np.ones(2), s2, eps=1e-2)
    assert np.allclose(calls[1], (s1 + 1e-2 * np.eye(2)) @ (s2 + 1e-2 * np.eye(2)))
    expected = 2 + 14 - 2 * (np.sqrt(1.01 * 9.01) + np.sqrt(4.01 * 0.01))
    assert fid == pytest.approx(expected)
    monkeypatch.setattr(generation, "_sqrtm", lambda m: np.diag([1.0 + 0.5j, 1.0]))
    with pytest.raises(ValueError, match="imaginary"):
        frechet_distance(np.zeros(2), s1, np.zeros(2), s1)
    monkeypatch.setattr(generation, "_sqrtm", lambda m: np.diag([1.0 + 1e-4j, 1.0]))
    assert frechet_distance(np.zeros(2), s1, np.zeros(2), s1) == pytest.approx(5.0 + 5.0 - 4.0)
