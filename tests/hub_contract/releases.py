"""Tiny release folders for the contract tests, written with the toolkit's own release writer."""

from __future__ import annotations

from pathlib import Path

from datasets import ClassLabel, Features, List, Value

from builders.release import write_json_atomic, write_readme, write_split

STEPS = Features({"video_id": Value("string"), "label": ClassLabel(names=["cut", "pour", "stir"]),
                  "segment": List(Value("float32"), length=2), "text": Value("string")})
NARR = Features({"video_id": Value("string"), "text": Value("string"), "start": Value("float32")})


def step(i: int, tag: str = "") -> dict:
    return {"video_id": f"v{i:03d}", "label": i % 3, "segment": [float(i), float(i) + 1.5], "text": f"step {i}{tag}"}


def narration(i: int) -> dict:
    return {"video_id": f"v{i:03d}", "text": f"now we cut {i}", "start": float(i)}


def make_release(root: Path, *, n_train: int = 5, n_test: int = 2, n_narr: int = 3, tag: str = "",
                 per_shard: int = 2, narrations: bool = True) -> Path:
    """``root`` with configs ``steps`` (train, test; default) and ``narrations`` (train), plus the side files."""
    root = Path(root)
    splits = {"steps": ["train", "test"]}
    write_split(root, "steps", "train", [step(i, tag) for i in range(n_train)], STEPS, per_shard)
    write_split(root, "steps", "test", [step(100 + i, tag) for i in range(n_test)], STEPS, per_shard)
    feats = {"steps": STEPS}
    if narrations:
        write_split(root, "narrations", "train", [narration(i) for i in range(n_narr)], NARR, per_shard)
        splits["narrations"] = ["train"]
        feats["narrations"] = NARR
    write_json_atomic(root / "manifest.json", {"corpus": "toy", "toolkit_version": "0.1.0"})
    write_json_atomic(root / "stats.json", {"release": {"steps": {"train": n_train}}})
    (root / "build_config.yaml").write_text("limit: null\n")
    write_readme(root, features_by_config=feats, splits_by_config=splits, default_config="steps",
                 card={"license": "cc-by-4.0", "pretty_name": "Toy"}, title="Toy", body="A toy release.")
    return root
