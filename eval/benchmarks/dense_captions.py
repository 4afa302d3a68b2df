"""Dense-captioning ground truth and predictions (docs/evaluation.md).

Ground truth, one or more reference files, each in one of:

- ActivityNet / PDVC layout ``{vid: {"duration", "timestamps": [[s, e], ...], "sentences": [...]}}``: the PDVC YouCook2
  file (``v_`` ids) and the Tasty file (recipe-slug ids, sentences ending in a space) are both in this layout;
- the official YouCook2 file ``{"database": {vid: {"subset", "annotations": [{"segment", "sentence"}]}}}``, restricted
  to one ``subset`` (default ``validation``).

Predictions: the ActivityNet submission ``{"version", "results": {vid: [{"sentence", "timestamp": [s, e]}]},
"external_data"}``. Prediction ids match ground-truth ids exactly or with ``v_`` toggled (docs/evaluation.md). Bad
predictions are counted, named warnings; a bad ground-truth file is an error naming the file and the video.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval.benchmarks.common import load_json, match_ids, read_video_list
from eval.registry import EvalError, Warnings

#: the ActivityNet evaluator keeps the first 1000 predictions of a video (``max_proposals``)
MAX_PROPOSALS = 1000


@dataclass
class VideoCaptions:
    """The captioned segments of one video, in file order."""

    timestamps: list[tuple[float, float]]
    sentences: list[str]


@dataclass
class Prediction:
    timestamp: tuple[float, float]
    sentence: str


@dataclass
class GroundTruth:
    """One dict per reference file (``vid -> VideoCaptions``) and the union of their ids in first-seen order."""

    refs: list[dict[str, VideoCaptions]]
    video_ids: list[str]
    format: str
    subset: str | None = None
    video_list: dict[str, Any] | None = None


@dataclass
class Predictions:
    """Predictions keyed by ground-truth id, in file order (all of them; densevid truncates to ``max_proposals``)."""

    by_video: dict[str, list[Prediction]]
    skipped: dict[str, int] = field(default_factory=dict)


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _check_duration(entry: dict, path: Path, vid: Any) -> None:
    """A ``duration``, when given, is a finite number >= 0 (NaN is refused as htm_align and crosstask refuse it)."""
    if "duration" in entry:
        d = entry["duration"]
        if not _number(d) or not math.isfinite(d) or d < 0:
            raise EvalError(f"ground truth {path}: video {vid!r} has duration {d!r}, expected a finite number >= 0")


def _segment(t: Any, path: Path, vid: Any) -> tuple[float, float]:
    """A ground-truth ``[start, end]``: finite, ``start <= end`` (a NaN or reversed segment could never be matched,
    so the file is refused rather than scored silently low)."""
    s, e = t[0], t[1]
    if not (math.isfinite(s) and math.isfinite(e)):
        raise EvalError(f"ground truth {path}: video {vid!r} has a non-finite timestamp {list(t)!r}")
    if e < s:
        raise EvalError(f"ground truth {path}: video {vid!r} has a reversed timestamp {list(t)!r} (end < start)")
    return (s, e)


def _read_anet(data: dict, path: Path) -> dict[str, VideoCaptions]:
    out: dict[str, VideoCaptions] = {}
    for vid, entry in data.items():
        if not isinstance(entry, dict) or "timestamps" not in entry or "sentences" not in entry:
            raise EvalError(f"ground truth {path}: video {vid!r} lacks 'timestamps'/'sentences' "
                            "(expected the ActivityNet layout {vid: {duration, timestamps, sentences}})")
        ts, sents = entry["timestamps"], entry["sentences"]
        if not isinstance(ts, list) or not isinstance(sents, list) or len(ts) != len(sents):
            raise EvalError(f"ground truth {path}: video {vid!r} has {len(ts) if isinstance(ts, list) else '?'} "
                            f"timestamps for {len(sents) if isinstance(sents, list) else '?'} sentences")
        _check_duration(entry, path, vid)
        stamps = []
        for t in ts:
            if not (isinstance(t, (list, tuple)) and len(t) == 2 and all(_number(x) for x in t)):
                raise EvalError(f"ground truth {path}: video {vid!r} has a malformed timestamp {t!r}")
            stamps.append(_segment(t, path, vid))
        if not all(isinstance(s, str) for s in sents):
            raise EvalError(f"ground truth {path}: video {vid!r} has a sentence that is not a string")
        out[str(vid)] = VideoCaptions(stamps, list(sents))
    return out


def _read_youcook2(data: dict, path: Path, subset: str) -> dict[str, VideoCaptions]:
    database = data["database"]
    if not isinstance(database, dict):
        raise EvalError(f"ground truth {path}: 'database' is not an object")
    out: dict[str, VideoCaptions] = {}
    subsets = set()
    for vid, entry in database.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("annotations"), list):
            raise EvalError(f"ground truth {path}: video {vid!r} lacks an 'annotations' list")
        subsets.add(entry.get("subset"))
        if entry.get("subset") != subset:
            continue
        _check_duration(entry, path, vid)
        stamps, sents = [], []
        for a in entry["annotations"]:
            seg = a.get("segment") if isinstance(a, dict) else None
            if not (isinstance(seg, list) and len(seg) == 2 and all(_number(x) for x in seg)) \
                    or not isinstance(a.get("sentence"), str):
                raise EvalError(f"ground truth {path}: video {vid!r} has a malformed annotation {a!r}")
            stamps.append(_segment(seg, path, vid))
            sents.append(a["sentence"])
        out[str(vid)] = VideoCaptions(stamps, sents)
    if not out:
        raise EvalError(f"ground truth {path}: no video of subset {subset!r} (subsets present: "
                        f"{', '.join(sorted(str(s) for s in subsets))})")
    return out


def read_ground_truth(paths: list[Path], subset: str | None, video_list: Path | None,
                      warnings: Warnings) -> GroundTruth:
    """Read the reference files, apply ``--subset`` and ``--video-list``; empty videos are dropped with a warning."""
    refs: list[dict[str, VideoCaptions]] = []
    formats = set()
    for path in paths:
        data = load_json(path, "ground truth")
        if not isinstance(data, dict) or not data:
            raise EvalError(f"ground truth {path}: expected a non-empty JSON object keyed by video id")
        if "database" in data:
            formats.add("youcook2")
            refs.append(_read_youcook2(data, path, subset or "validation"))
        else:
            if subset is not None:
                raise EvalError(f"ground truth {path}: --subset applies to the official YouCook2 file only")
            formats.add("anet")
            refs.append(_read_anet(data, path))
    fmt = "+".join(sorted(formats))
    for ref in refs:
        for vid in [v for v, c in ref.items() if not c.timestamps]:
            warnings.add("empty_gt_video", f"ground-truth video {vid} has no segment and is not scored")
            del ref[vid]
    video_ids = list(dict.fromkeys(v for ref in refs for v in ref))
    listing = None
    if video_list is not None:
        wanted = read_video_list(video_list)
        mapping = match_ids(video_ids, wanted)
        for vid in wanted:
            if vid not in mapping:
                warnings.add("video_list_unknown", f"{vid} (from {video_list}) is not in the ground truth")
        keep = set(mapping.values())
        video_ids = [v for v in video_ids if v in keep]
        refs = [{v: c for v, c in ref.items() if v in keep} for ref in refs]
        listing = {"file": str(video_list), "listed": len(wanted), "videos": len(video_ids)}
    if not video_ids:
        raise EvalError("the ground truth holds no video to score" + (" after --video-list" if video_list else ""))
    return GroundTruth(refs, video_ids, fmt, subset=(subset or "validation") if "youcook2" in formats else None,
                       video_list=listing)


def read_predictions(path: Path, gt: GroundTruth, warnings: Warnings) -> Predictions:
    """Read an ActivityNet submission; every problem is a counted warning named after its reason."""
    data = load_json(path, "prediction")
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise EvalError(f"prediction file {path}: expected {{\"version\", \"results\": {{video: [{{\"sentence\", "
                        "\"timestamp\": [s, e]}]}}, \"external_data\"}}")
    missing_fields = [k for k in ("version", "external_data") if k not in data]
    if missing_fields:
        warnings.add("missing_submission_field", f"{path} lacks {', '.join(missing_fields)} (not needed to score)")
    results: dict[str, Any] = data["results"]
    mapping = match_ids(gt.video_ids, results.keys())
    skipped: dict[str, int] = {}

    def skip(reason: str, message: str, n: int = 1) -> None:
        skipped[reason] = skipped.get(reason, 0) + n
        warnings.add(reason, message, n)

    by_video: dict[str, list[Prediction]] = {}
    for vid, items in results.items():
        if vid not in mapping:
            skip("unknown_video", f"predictions for {vid}, absent from the ground truth, are ignored",
                 len(items) if isinstance(items, list) else 1)
            continue
        target = mapping[vid]
        if target in by_video:
            skip("duplicate_video", f"{vid} and another key both name ground-truth video {target}; kept the first",
                 len(items) if isinstance(items, list) else 1)
            continue
        if not isinstance(items, list):
            skip("malformed_prediction", f"{path}: results[{vid!r}] is not a list")
            continue
        preds: list[Prediction] = []
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("sentence"), str):
                skip("malformed_prediction", f"{path}: results[{vid!r}][{i}] lacks a string 'sentence'")
                continue
            ts = item.get("timestamp")
            if not (isinstance(ts, (list, tuple)) and len(ts) == 2 and all(_number(x) for x in ts)):
                skip("malformed_prediction", f"{path}: results[{vid!r}][{i}] has no [start, end] 'timestamp'")
                continue
            s, e = float(ts[0]), float(ts[1])
            if not (math.isfinite(s) and math.isfinite(e)) or e < s:
                # kept: it counts as a prediction of the video (precision denominators) but overlaps nothing
                warnings.add("bad_timestamp", f"results[{vid!r}][{i}] has timestamp {list(ts)} (never matches)")
            if any(ord(ch) >= 128 for ch in item["sentence"]):
                warnings.add("non_ascii_text", f"results[{vid!r}][{i}]: non-ASCII characters become spaces")
            preds.append(Prediction((ts[0], ts[1]), item["sentence"]))
        if not preds:
            warnings.add("empty_prediction_list", f"{vid} has an empty prediction list (scored 0)")
        by_video[target] = preds
    for vid in gt.video_ids:
        if vid not in by_video:
            warnings.add("no_prediction", f"ground-truth video {vid} has no prediction key")
    return Predictions(by_video, skipped)
