"""The reference NaSVA grounding model (docs/evaluation.md; Li et al., ECCV 2024, §3.2-3.3): model, loss, data, trainer, inference and
a synthetic benchmark.

    python -m builders.nasva.train --features DIR --labels FILE --out CKPT_DIR
    python -m builders.nasva.infer --ckpt CKPT_DIR --features DIR --texts FILE --out PRED.json
    python -m builders.nasva.synthetic --out DIR

Submodules import torch; import them explicitly (``from builders.nasva.model import NaSVA``).
"""
