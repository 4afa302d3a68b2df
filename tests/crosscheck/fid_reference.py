"""Cross-check the ShowHowTo FID (``eval/metrics/generation.py``) against mseitzer/pytorch-fid, side by side.

Not part of the test suite and nothing upstream is vendored: point it at a checkout of pytorch-fid and it runs that
checkout's ``calculate_frechet_distance`` (statistics as its ``calculate_activation_statistics``: mean, ``np.cov``
with rowvar=False) next to ours on the same random features, and prints the largest absolute difference.

    python tests/crosscheck/fid_reference.py --pytorch-fid PATH/TO/pytorch-fid [--trials 20] [--seed 0]

``src/pytorch_fid/fid_score.py`` imports torch, torchvision and its InceptionV3 at module top; torchvision is not
installable here, so only the function's own source is taken out of the file (``ast``) and executed in a throwaway
namespace with ``numpy`` and ``scipy.linalg`` bound, as its module binds them. The cases cover well-conditioned
covariances, fewer samples than dimensions (a singular product: the eps branch) and shifted means.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def reference_function(checkout: Path) -> Any:
    """``calculate_frechet_distance`` of the checkout, executed from its source text (no torch/torchvision)."""
    source_file = checkout / "src" / "pytorch_fid" / "fid_score.py"
    if not source_file.is_file():
        raise SystemExit(f"not a pytorch-fid checkout: {source_file} missing")
    source = source_file.read_text(encoding="utf-8")
    tree = ast.parse(source)
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "calculate_frechet_distance"),
                None)
    if node is None:
        raise SystemExit(f"{source_file} defines no calculate_frechet_distance")
    from scipy import linalg

    namespace: dict[str, Any] = {"np": np, "linalg": linalg, "print": lambda *a, **k: None}
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(source_file), "exec"), namespace)  # noqa: S102
    return namespace["calculate_frechet_distance"]


def cases(trials: int, seed: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = [("spec §11 worked example", np.array([[1, 1], [5, 1], [1, 5], [5, 5]], float),
            np.array([[0, 0], [2, 0], [0, 2], [2, 2]], float))]
    for t in range(trials):
        d = int(rng.integers(2, 64))
        kind = ("well-conditioned", "fewer samples than dims", "shifted")[t % 3]
        n1, n2 = (int(rng.integers(d + 10, 4 * d + 20)), int(rng.integers(d + 10, 4 * d + 20)))
        if kind == "fewer samples than dims":
            n1, n2 = int(rng.integers(2, d + 1)), int(rng.integers(2, d + 1))
        x = rng.standard_normal((n1, d)) @ rng.standard_normal((d, d))
        y = rng.standard_normal((n2, d)) * rng.uniform(0.2, 3.0, d)
        if kind == "shifted":
            y = y + rng.normal(0, 2, d)
        out.append((f"{kind} d={d} n={n1}/{n2}", x, y))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pytorch-fid", type=Path, required=True, help="checkout of mseitzer/pytorch-fid")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from eval.metrics.generation import frechet_distance_from_features

    ref = reference_function(args.pytorch_fid)
    worst = 0.0
    for name, x, y in cases(args.trials, args.seed):
        theirs = float(ref(x.mean(0), np.cov(x, rowvar=False), y.mean(0), np.cov(y, rowvar=False)))
        ours = frechet_distance_from_features(x, y)
        diff = abs(theirs - ours)
        worst = max(worst, diff)
        print(f"{name:<40} pytorch-fid {theirs:14.6f}  ours {ours:14.6f}  |diff| {diff:.3e}")
    print(f"max abs difference: {worst:.3e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
