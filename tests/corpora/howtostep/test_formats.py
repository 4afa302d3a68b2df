"""Transcript formats and visual-feature sources through whole HowToStep builds (spec howtostep.md §2.2, §2.4, §3.2,
§6): ``htm_raw`` (TAN cleaning, then ``no_punct_fallback`` sentences), ``segments``, ``sentencified``, the
required ``--transcript-format``, features computed with a (tiny, random-init) CLIP image tower, and the ``paper``
preset's missing model paths. Every narration list below is computed by hand from the rules of §3.2.

Fast: replayed LLM answers, the hash text encoder, ``rounds=0`` (no labeler training), simulated features."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from .conftest import (
    FAST,
    build_ok,
    narration_chunks,
    run_build,
    stats,
    table,
    write_replay,
    write_videos_csv,
    write_whisperx,
)


def _first_words_steps(sentences: list[str], n: int = 6) -> str:
    """A numbered list whose steps are the first ``n`` words of each narration (strong Stage-1 evidence)."""
    return "\n".join(f"{k + 1}. {' '.join(s.split()[:n])}" for k, s in enumerate(sentences))


def _build_format(d: Path, fmt: str, transcripts: Path, narrations: dict[str, list[str]], *extra: str) -> Path:
    """Build ``fmt`` transcripts with the LLM answering each 10-sentence chunk from the expected narrations."""
    answers = {vid: [_first_words_steps(texts[i:i + 10]) for i in range(0, len(texts), 10)]
               for vid, texts in narrations.items()}
    write_replay(d / "replay.jsonl", answers)
    write_videos_csv(d / "videos.csv", list(narrations))
    return build_ok(d / "out", "--videos", str(d / "videos.csv"), "--transcripts", str(transcripts),
                    "--transcript-format", fmt, "--set", "llm=replay", "--set", f"llm_replay={d / 'replay.jsonl'}",
                    *FAST, "--set", "rounds=0", "--set", "visual_features=simulated", *extra)


def _narrations(root: Path) -> dict[str, dict]:
    return {r["video_id"]: r for r in table(root, "narrations")}


def _triples(row: dict) -> list[tuple[str, float, float]]:
    return [(n["text"], round(n["start"], 3), round(n["end"], 3)) for n in row["narrations"]]


# ============================================================================ htm_raw (spec §2.2, §3.2 (a)-(f))
#: YouTube-ASR-like rolling captions of one video: (text, start, end)
RAW_CAPTIONS = [
    ("[Music]", 0.0, 3.0),                                                                       # (c) tag
    ("hi everyone today we are making a quick tomato soup\nfirst wash four ripe tomatoes in cold water", 3.0, 7.0),
    ("first wash four ripe tomatoes in cold water\nthen dry them with a clean kitchen towel", 7.0, 10.0),
    ("then dry them with a clean kitchen towel", 12.0, 15.0),
    ("now chop the tomatoes", 15.0, 15.1),                                                       # (c) <= 0.2 s
    ("now chop the tomatoes into small", 15.0, 16.5),                                            # (d) prefix run
    ("now chop the tomatoes into small cubes with a sharp knife", 15.0, 18.0),
    ("[Applause]", 18.0, 19.0),                                                                  # (c) tag
    ("put a large pot on the stove over medium heat", 20.0, 24.0),
    ("add two spoons of olive oil and one chopped onion", 23.5, 27.0),                          # (e) overlap
    ("cook the onion for five minutes until it turns soft", 27.0, 31.0),
    ("then add the tomatoes and a cup of water", 33.0, 36.0),
    ("let the soup simmer for twenty minutes", 36.0, 39.0),
    ("blend everything until smooth and season with salt and pepper", 41.0, 45.0),
    ("[Music]", 45.0, 48.0),                                                                     # (c) tag
    ("serve the soup hot with some fresh bread", 50.0, 53.0),
]
#: no_punct_fallback by hand: cut before a caption > 1 s after the buffer, or at a caption boundary once >= 20
#: words are buffered (c8 + c9 = 20 words, then c10 starts a new sentence)
RAW_NARRATIONS = [
    ("hi everyone today we are making a quick tomato soup first wash four ripe tomatoes in cold water", 3.0, 10.0),
    ("then dry them with a clean kitchen towel now chop the tomatoes into small cubes with a sharp knife", 12.0, 18.0),
    ("put a large pot on the stove over medium heat add two spoons of olive oil and one chopped onion", 20.0, 27.0),
    ("cook the onion for five minutes until it turns soft", 27.0, 31.0),
    ("then add the tomatoes and a cup of water let the soup simmer for twenty minutes", 33.0, 39.0),
    ("blend everything until smooth and season with salt and pepper", 41.0, 45.0),
    ("serve the soup hot with some fresh bread", 50.0, 53.0),
]
#: a punctuated raw-caption video: one sentence per caption (sentencify_mode "punctuated")
PUNCT_CAPTIONS = [(t, 4.0 * i, 4.0 * i + 3.5) for i, t in enumerate([
    "Today I will show you how to make pancakes.", "First, put two cups of flour in a bowl.",
    "Then add two eggs and a cup of milk.", "Whisk everything together until it is smooth.",
    "Let the batter rest for ten minutes.", "Heat a little butter in a frying pan.",
    "Pour a small ladle of batter into the pan.", "Cook it until bubbles form on the top.",
    "Flip the pancake and cook the other side.", "Stack the pancakes on a warm plate.",
    "Serve them with maple syrup and fresh berries."])]


@pytest.fixture(scope="module")
def htm_raw(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hts_htm_raw")
    raw = {vid: {"text": [c[0] for c in caps], "start": [c[1] for c in caps], "end": [c[2] for c in caps]}
           for vid, caps in (("rawsoup0001", RAW_CAPTIONS), ("rawcake0001", PUNCT_CAPTIONS))}
    (d / "raw_caption.json").write_text(json.dumps(raw))
    return _build_format(d, "htm_raw", d / "raw_caption.json",
                         {"rawsoup0001": [t for t, _, _ in RAW_NARRATIONS],
                          "rawcake0001": [t for t, _, _ in PUNCT_CAPTIONS]})


def test_the_paper_preset_punctuation_model_cuts_unpunctuated_raw_captions(tmp_path):
    """``sentencify_mode=bert`` (spec §3.2): TAN's punctuation model from a local folder (here a tiny random BERT
    biased to end every word with a full stop) sentencifies the unpunctuated video; the punctuated one is unchanged."""
    import torch
    from transformers import BertConfig, BertForTokenClassification, BertTokenizerFast

    labels = ["OU", "OO", ".O", ",O"]
    words = sorted({w for t, _, _ in RAW_NARRATIONS for w in t.lower().replace(".", " ").split()})
    folder = tmp_path / "punct"
    folder.mkdir()
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    tok = BertTokenizerFast(vocab=str(folder / "vocab.txt"))
    cfg = BertConfig(vocab_size=len(words) + 5, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, num_labels=4, id2label=dict(enumerate(labels)),
                     label2id={k: i for i, k in enumerate(labels)})
    model = BertForTokenClassification(cfg).eval()
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.log(torch.tensor([0.05, 0.5, 0.4, 0.05])))  # OO 0.5-0.4 < ".O" 0.4
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    raw = {vid: {"text": [c[0] for c in caps], "start": [c[1] for c in caps], "end": [c[2] for c in caps]}
           for vid, caps in (("rawsoup0001", RAW_CAPTIONS), ("rawcake0001", PUNCT_CAPTIONS))}
    (tmp_path / "raw_caption.json").write_text(json.dumps(raw))
    root = _build_format(tmp_path, "htm_raw", tmp_path / "raw_caption.json",
                         {"rawsoup0001": [t for t, _, _ in RAW_NARRATIONS],
                          "rawcake0001": [t for t, _, _ in PUNCT_CAPTIONS]},
                         "--set", "sentencify_mode=bert", "--set", f"punctuation_model_path={folder}")
    rows = _narrations(root)
    soup = rows["rawsoup0001"]
    assert soup["sentencify_mode"] == "bert"
    got_words = [n["text"] for n in soup["narrations"]]
    assert all(len(t.split()) == 1 and t.endswith(".") for t in got_words)
    assert [t[:-1] for t in got_words] == [w for t, _, _ in RAW_NARRATIONS for w in t.lower().split()]
    assert rows["rawcake0001"]["sentencify_mode"] == "punctuated"


def test_htm_raw_is_cleaned_and_sentencified_by_the_tan_rules(htm_raw):
    rows = _narrations(htm_raw)
    assert _triples(rows["rawsoup0001"]) == RAW_NARRATIONS
    assert rows["rawsoup0001"]["sentencify_mode"] == "no_punct_fallback"
    assert _triples(rows["rawcake0001"]) == [(t, s, e) for t, s, e in PUNCT_CAPTIONS]
    assert rows["rawcake0001"]["sentencify_mode"] == "punctuated"
    for r in rows.values():
        assert r["transcript_source"] == "htm_raw" and r["asr_model"] == ""
    c = stats(htm_raw)["steps"]["narrations"]["counters"]
    assert (c["caption_tag"], c["caption_too_short"], c["linebreak_duplicate"], c["prefix_merged"],
            c["overlap_averaged"]) == (3, 1, 2, 1, 1)
    assert c["narrations"] == len(RAW_NARRATIONS) + len(PUNCT_CAPTIONS)
    steps = {r["video_id"]: r for r in table(htm_raw, "steps")}
    assert steps["rawsoup0001"]["provenance"]["sentencify_mode"] == "no_punct_fallback"
    assert steps["rawsoup0001"]["provenance"]["transcript_source"] == "htm_raw"
    assert steps["rawsoup0001"]["num_frames"] == 53  # simulated: floor(53.0 s), the last narration end


# ============================================================================ segments (spec §2.2, §3.2 punctuated)
SEGMENTS = [
    {"start": 0.0, "end": 4.0, "text": "Fill a large pot with water. Bring the water to a boil."},
    {"start": 5.0, "end": 9.0, "text": "Add a pinch of salt and the dry pasta,"},
    {"start": 9.0, "end": 12.0, "text": " then stir well. Cook the pasta for ten minutes."},
    {"start": 13.0, "end": 17.0, "text": "Drain the pasta in a colander. Toss it with the tomato sauce. Serve it hot "
                                         "with cheese."},
]
#: equal word slots per segment, cut after a word ending in . ! ? (segment 3: 17 words of 4/17 s)
SEGMENT_NARRATIONS = [
    ("Fill a large pot with water.", 0.0, 2.0), ("Bring the water to a boil.", 2.0, 4.0),
    ("Add a pinch of salt and the dry pasta, then stir well.", 5.0, 10.0),
    ("Cook the pasta for ten minutes.", 10.0, 12.0),
    ("Drain the pasta in a colander.", 13.0, round(13 + 6 * 4 / 17, 3)),
    ("Toss it with the tomato sauce.", round(13 + 6 * 4 / 17, 3), round(13 + 12 * 4 / 17, 3)),
    ("Serve it hot with cheese.", round(13 + 12 * 4 / 17, 3), 17.0),
]


def test_segments_json_is_cut_into_punctuated_sentences(tmp_path):
    (tmp_path / "segments.json").write_text(json.dumps({"pastaseg001": SEGMENTS}))
    root = _build_format(tmp_path, "segments", tmp_path / "segments.json",
                         {"pastaseg001": [t for t, _, _ in SEGMENT_NARRATIONS]})
    row = _narrations(root)["pastaseg001"]
    assert _triples(row) == SEGMENT_NARRATIONS
    assert row["sentencify_mode"] == "punctuated" and row["transcript_source"] == "segments"
    steps = table(root, "steps")
    assert [r["video_id"] for r in steps] == ["pastaseg001"] and steps[0]["num_frames"] == 17


# ============================================================================ sentencified (spec §2.2, §3.2)
SENTENCIFIED = [
    ("Cut the bread into thick slices.", 0.0, 3.0),
    ("Whisk three eggs with a cup of milk.", 3.5, 7.0),
    ("A sentence with its end before its start.", 9.0, 8.0),        # end < start: bad_timestamp
    ("Soak each slice in the egg mixture.", 7.5, 11.0),
    ("A sentence with a negative start.", -2.0, 1.0),               # negative: bad_timestamp
    ("  Fry the slices in butter until golden.  ", 11.5, 16.0),     # stripped
    ("Dust them with sugar and cinnamon.", 16.5, 20.0),
]


def test_sentencified_is_used_as_is_after_the_timestamp_checks(tmp_path):
    obj = {"toastsen001": {"text": [t for t, _, _ in SENTENCIFIED], "start": [s for _, s, _ in SENTENCIFIED],
                           "end": [e for _, _, e in SENTENCIFIED]}}
    (tmp_path / "sentencified.json").write_text(json.dumps(obj))
    expected = [(t.strip(), s, e) for t, s, e in SENTENCIFIED if 0 <= s <= e]
    root = _build_format(tmp_path, "sentencified", tmp_path / "sentencified.json",
                         {"toastsen001": [t for t, _, _ in expected]})
    row = _narrations(root)["toastsen001"]
    assert len(expected) == 5 and _triples(row) == expected
    assert row["sentencify_mode"] == "sentencified" and row["transcript_source"] == "sentencified"
    c = stats(root)["steps"]["narrations"]["counters"]
    assert c["bad_timestamp"] == 2 and c["narrations"] == 5


def test_a_missing_transcript_format_exits_2_and_says_so(tmp_path):
    write_videos_csv(tmp_path / "videos.csv", ["toastsen001"])
    (tmp_path / "t.json").write_text("{}")
    rc, err, root = run_build(tmp_path / "out", "--videos", str(tmp_path / "videos.csv"),
                              "--transcripts", str(tmp_path / "t.json"))
    assert rc == 2
    assert "--transcript-format is required" in err and "htm_raw" in err and "sentencified" in err
    assert not root.exists()


# ============================================================================ computed features (spec §2.4, §6)
CLIP_SENTENCES = [("Crack two eggs into a bowl.", 0.0, 1.4), ("Beat them with a fork.", 1.5, 2.9),
                  ("Melt butter in a small pan.", 3.0, 4.4), ("Pour in the eggs.", 4.5, 5.9),
                  ("Stir gently until set.", 6.0, 7.4)]


def _tiny_clip(folder: Path) -> Path:
    """The random-init CLIPModel of offline_models.md §5 (vision image_size 32, projection_dim 16)."""
    import torch
    from transformers import CLIPConfig, CLIPModel

    text = {"vocab_size": 1000, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 2, "max_position_embeddings": 77}
    vision = {"image_size": 32, "patch_size": 8, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 2}
    cfg = CLIPConfig(text_config=text, vision_config=vision, projection_dim=16)
    torch.manual_seed(0)
    CLIPModel(cfg).eval().save_pretrained(str(folder))
    return folder


def _stored_features(out: Path, vid: str) -> np.ndarray:
    """The fp16 rows the build stored for ``vid``: its span of its work shard's store file (one file a shard)."""
    from builders.core.shards import read_rows

    stage = next((out / ".work" / "howtostep" / "videos").glob("*_visual_features-*"))
    (row,) = [r for i in range(len(list(stage.glob("part-*.stats.json")))) for r in read_rows(stage, i)
              if r["video_id"] == vid]
    assert row["features_kind"] == "dense" and row["features_path"].endswith(".f16.npy")
    a, b = row["features_rows"]
    return np.load(row["features_path"])[a:b]


def test_computed_features_come_from_the_clip_image_tower(tmp_path):
    from builders.models.media import probe
    from builders.models.vision_encoder import HFClipVisionEncoder, extract_video_features
    from tests.models.test_media import make_clip

    vid, broken = "eggsclip001", "brokenclip1"
    clip_dir = _tiny_clip(tmp_path / "clip")
    (tmp_path / "media").mkdir()
    video = make_clip(tmp_path / "media" / f"{vid}.mp4", seconds=7.5)
    (tmp_path / "media" / f"{broken}.mp4").write_bytes(np.random.default_rng(1).bytes(3000))
    (tmp_path / "tr").mkdir()
    for v in (vid, broken):
        write_whisperx(tmp_path / "tr" / f"{v}.json", CLIP_SENTENCES)
    texts = [t for t, _, _ in CLIP_SENTENCES]
    assert len(narration_chunks(tmp_path / "tr" / f"{vid}.json")) == 1
    root = _build_format(tmp_path, "whisperx", tmp_path / "tr", {vid: texts, broken: texts},
                         "--media", str(tmp_path / "media"), "--set", "visual_features=compute",
                         "--set", "visual_dim=16", "--set", f"vision_model_path={clip_dir}")
    # a video whose frames cannot be decoded is dropped as video_unreadable (spec §7), though it has a transcript
    assert [(d["video_id"], d["stage"], d["reason"]) for d in table(root, "dropped_videos")] == [
        (broken, "visual_features", "video_unreadable")]
    assert stats(root)["steps"]["transcribe"]["counters"]["video_unreadable_with_transcript"] == 1
    duration = probe(video).duration
    (row,) = table(root, "steps")
    assert row["num_frames"] == math.floor(duration) == 7
    assert row["duration"] == pytest.approx(duration, abs=1e-3)
    assert row["provenance"]["visual_features"] == "computed"
    x = _stored_features(tmp_path / "out", vid)
    assert x.dtype == np.float16 and x.shape == (7, 16)
    want, manifest = extract_video_features(video, HFClipVisionEncoder(clip_dir), num_seconds=7)
    assert manifest["T"] == 7 and np.array_equal(x, want.astype(np.float16))


def _save_word_tokenizer(folder: Path, texts: list[str]) -> None:
    """A word-level tokenizer over ``texts`` saved beside the tiny CLIPModel (no CLIP vocabulary exists offline)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = sorted({w for t in texts for w in t.lower().replace(".", " ").split()})
    vocab = {"[PAD]": 0, "[UNK]": 1, **{w: i + 2 for i, w in enumerate(words)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]").save_pretrained(str(folder))


def test_mptva_s_v_short_uses_the_clip_text_tower_of_computed_features(tmp_path):
    """Spec §4 / §3.10: with computed CLIP features, S-V-short is cos(CLIP text(step), CLIP image(second t))."""
    from builders.models.vision_encoder import HFClipVisionEncoder
    from tests.models.test_media import make_clip

    vid = "eggsmptva01"
    clip_dir = _tiny_clip(tmp_path / "clip")
    texts = [t for t, _, _ in CLIP_SENTENCES]
    _save_word_tokenizer(clip_dir, texts)
    (tmp_path / "media").mkdir()
    make_clip(tmp_path / "media" / f"{vid}.mp4", seconds=7.5)
    (tmp_path / "tr").mkdir()
    write_whisperx(tmp_path / "tr" / f"{vid}.json", CLIP_SENTENCES)
    root = _build_format(tmp_path, "whisperx", tmp_path / "tr", {vid: texts},
                         "--media", str(tmp_path / "media"), "--set", "visual_features=compute",
                         "--set", "visual_dim=16", "--set", f"vision_model_path={clip_dir}",
                         "--set", "labeler=mptva", "--set", "mptva.gamma_mode=keep_ratio")
    (row,) = table(root, "steps")
    x = _stored_features(tmp_path / "out", vid).astype(np.float32)
    enc = HFClipVisionEncoder(clip_dir)
    for s in row["steps"]:
        assert len(s["pathway_scores"]) == 3 and s["pathway_scores"][2] is not None
        t = enc.encode_texts([s["text"]])[0]
        cos = (x @ t) / (np.linalg.norm(x, axis=1) * np.linalg.norm(t))
        k_star = [k for k in range(int(s["start"]), int(s["end"]) + 1)
                  if abs(cos[k] - s["pathway_scores"][2]) < 1e-3]
        assert k_star, (s, cos)
        assert s["score"] == pytest.approx(sum(s["pathway_scores"]) / 3, abs=1e-5)


# ============================================================================ presets (spec §6)
def test_the_paper_preset_without_model_paths_exits_2_naming_them(tmp_path):
    rc, err, _ = run_build(tmp_path / "out", "--set", "preset=paper")
    assert rc == 2
    for key in ("asr_model_path", "asr_align_model_path", "llm_model_path", "vision_model_path"):
        assert f"--set {key}=PATH" in err, key
    # keys the user sets explicitly win over the preset: a replayed LLM needs no llm_model_path
    replay = write_replay(tmp_path / "r.jsonl", {})
    rc, err, _ = run_build(tmp_path / "out", "--set", "preset=paper", "--set", "llm=replay",
                           "--set", f"llm_replay={replay}")
    assert rc == 2 and "vision_model_path" in err and "llm_model_path" not in err


def test_a_real_build_never_simulates_features_unless_asked(tmp_path):
    """Spec §6: simulated features are for the bundled sample and tests; inputs without --features exit 2."""
    sample = Path(__file__).resolve().parents[3] / "builders" / "samples" / "howtostep"
    rc, err, root = run_build(tmp_path / "out", "--videos", str(sample / "HowTo100M_v1.csv"), "--transcripts",
                              str(sample / "transcripts"), "--transcript-format", "whisperx")
    assert rc == 2 and "--features DIR" in err and "visual_features=simulated" in err and not root.exists()
