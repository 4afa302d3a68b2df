"""builders.models.chat_classifier: the MARC chat/content classifier, ``logreg`` default (marc.md §3.5, §4, §8.7)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from builders.models import chat_classifier as cc
from builders.models.chat_classifier import ChatClassifier, labelled_sentences, train_logreg, transcript_sentences
from builders.ops.chat_content import TEST_FRACTION, VALIDATION_FRACTION, recipe_type_split
from builders.sources.transcripts import RAW_CAPTION_SOURCE, Transcript, open_transcripts
from builders.sources.youcook2 import YouCook2Video

# --------------------------------------------------------------------------------------------- hand-written data

#: 8 YouCook2 recipe types x 2 videos x 6 instructions
CONTENT = {
    "101": [["Fry the bacon in a pan until crispy.", "Toast two slices of bread.",
             "Spread mayonnaise on the toast.", "Lay the lettuce leaves on the bread.",
             "Add the tomato slices and the bacon.", "Cut the sandwich in half."],
            ["Put the bacon strips on a baking tray.", "Bake the bacon for fifteen minutes.",
             "Slice the tomatoes thinly.", "Wash and dry the lettuce.",
             "Stack bacon, lettuce and tomato on the toast.", "Close the sandwich with the second slice."]],
    "104": [["Crack four eggs into a bowl.", "Whisk the eggs with a pinch of salt.",
             "Melt the butter in a nonstick pan over low heat.", "Pour the eggs into the pan.",
             "Stir slowly with a spatula until they set.", "Take the pan off the heat and add chives."],
            ["Beat the eggs with a splash of milk.", "Heat a knob of butter in the skillet.",
             "Add the beaten eggs to the skillet.", "Fold the eggs gently from the edges.",
             "Season with black pepper.", "Serve the eggs on buttered toast."]],
    "108": [["Mix the flour, sugar and baking powder in a bowl.", "Whisk in the milk and the egg.",
             "Let the batter rest for ten minutes.", "Grease the griddle with a little oil.",
             "Pour a ladle of batter onto the griddle.", "Flip the pancake when bubbles appear."],
            ["Sift the flour into a large bowl.", "Make a well and add the eggs and milk.",
             "Stir in the melted butter.", "Heat the frying pan over medium heat.",
             "Cook each pancake for two minutes per side.", "Stack the pancakes and pour syrup over them."]],
    "113": [["Butter one side of each slice of bread.", "Place a slice butter side down in the pan.",
             "Lay the cheddar cheese on the bread.", "Top with the other slice, butter side up.",
             "Cook until the bottom is golden brown.", "Flip the sandwich and press it down."],
            ["Grate the cheese.", "Spread butter on the outside of the bread.",
             "Sprinkle the cheese between the slices.", "Heat a skillet over medium low heat.",
             "Grill the sandwich for three minutes on each side.", "Slice it diagonally."]],
    "122": [["Chop the onion and the garlic.", "Saute the onion in olive oil until soft.",
             "Add the canned tomatoes and the stock.", "Simmer the soup for twenty minutes.",
             "Blend the soup until smooth.", "Stir in the cream and season with salt."],
            ["Roast the tomatoes in the oven with garlic.", "Melt butter in a large pot.",
             "Add the roasted tomatoes to the pot.", "Pour in the vegetable broth.",
             "Puree the mixture with an immersion blender.", "Garnish the soup with fresh basil."]],
    "203": [["Combine the ground beef, breadcrumbs and egg.", "Roll the mixture into small balls.",
             "Brown the meatballs in a hot pan.", "Add the marinara sauce and simmer.",
             "Boil the spaghetti in salted water.", "Drain the pasta and top with the meatballs."],
            ["Soak the bread in milk.", "Mix the pork, beef, parmesan and soaked bread.",
             "Shape the meat into balls.", "Bake the meatballs for twenty minutes.",
             "Cook the spaghetti until al dente.", "Toss the pasta with the sauce and meatballs."]],
    "228": [["Drain and rinse the chickpeas.", "Put the chickpeas in a food processor.",
             "Add the tahini, lemon juice and garlic.", "Blend until the mixture is smooth.",
             "Drizzle in cold water while blending.", "Spoon the hummus into a bowl and add olive oil."],
            ["Peel the skins off the cooked chickpeas.", "Process the tahini and lemon juice first.",
             "Add the chickpeas and the cumin.", "Scrape down the sides of the bowl.",
             "Season the hummus with salt.", "Sprinkle paprika on top."]],
    "403": [["Soak the rice noodles in warm water.", "Mix the tamarind, fish sauce and sugar.",
             "Stir fry the shrimp in a hot wok.", "Push the shrimp aside and scramble an egg.",
             "Add the noodles and the sauce.", "Toss in bean sprouts and crushed peanuts."],
            ["Slice the tofu into cubes.", "Fry the tofu until golden.",
             "Add the garlic and shallots to the wok.", "Add the drained noodles.",
             "Pour the pad thai sauce over the noodles.", "Serve with lime wedges."]],
}

#: per video: two openers, one interjection, two closers
CHAT = [
    ["Hey guys, welcome back to my channel.", "Today I am going to show you my favourite sandwich.",
     "Oh, this smells so good.", "Thank you so much for watching.", "Don't forget to subscribe."],
    ["Hi everyone, it's Maria here.", "This recipe is a family classic that my grandma loved.",
     "I love this part.", "Let me know in the comments what you think.", "See you next week, bye."],
    ["Good morning and welcome to my kitchen.", "Breakfast is my favourite meal of the day.",
     "Look at that, so beautiful.", "If you liked this video give it a thumbs up.", "Take care everybody."],
    ["What's up, YouTube.", "My kids ask me to make this every single weekend.",
     "Honestly I could eat this every day.", "Thanks for hanging out with me today.", "Catch you later."],
    ["Hello friends and welcome to another episode.", "So many of you asked for this recipe.",
     "Wow, it looks amazing already.", "Hit the bell so you never miss a video.", "Have a great day."],
    ["Hey there, I'm chef Tony.", "This one is really quick and easy.",
     "My husband is going to be so happy.", "Please share this video with your friends.", "Peace out."],
    ["Welcome back to the show, everybody.", "It's a rainy day here so I wanted something cozy.",
     "That is exactly what we want.", "Thanks again to our sponsor for supporting the channel.", "Bye for now."],
    ["Hi, and thank you for joining me.", "Before we start, check out the link in the description.",
     "Isn't that gorgeous?", "Leave a comment below and tell me how yours turned out.", "Until next time."],
    ["Hey y'all, welcome to the kitchen.", "My mom used to make this when I was little.",
     "Oh my goodness, look at that.", "If you enjoyed this, please subscribe.", "Love you guys."],
    ["Good evening, friends.", "Tonight we are keeping things simple.",
     "I'm so excited about this one.", "That's all for today's video.", "See you in the next one."],
    ["Hello again, it's me.", "This is probably the most requested video on my channel.",
     "Mmm, that smells heavenly.", "Follow me on Instagram for more recipes.", "Goodbye."],
    ["Welcome, welcome, welcome.", "I've been making this for years and it never fails.",
     "You guys are going to love this.", "Thanks for stopping by.", "Happy cooking."],
    ["Hey guys, what is going on.", "Today we are doing a classic comfort food.",
     "This is my favourite part of the whole process.", "Don't forget to like and subscribe.", "Later."],
    ["Hi folks, welcome to my little corner of the internet.", "I got this recipe from a friend in Beirut.",
     "So creamy, just look at it.", "Share your pictures with me on social media.", "Ciao."],
    ["Sawasdee everyone, welcome back.", "This dish reminds me of my trip to Bangkok.",
     "Street food vibes right here.", "Thanks so much for watching, and subscribe for more.", "Bye bye."],
    ["Hi, I'm Jenny and this is my channel.", "I want to show you a vegetarian version today.",
     "It's looking really good so far.", "Let me know which recipe you want to see next.", "Cheers."],
]


def _timed(lines):
    """Consecutive lines, 0.5 s + 0.4 s per word each, starting at 2 s."""
    out, t = [], 2.0
    for text in lines:
        dur = round(0.5 + 0.4 * len(text.split()), 2)
        out.append((t, round(t + dur, 2), text))
        t = round(t + dur, 2)
    return out


def toy_corpus():
    """Videos, transcripts and the intended labels: chat 0,1 | content 0-2 | chat 2 | content 3-5 | chat 3,4."""
    videos, transcripts, intended = {}, {}, {}
    k = 0
    for rtype, pair in CONTENT.items():
        for j, content in enumerate(pair):
            chat = CHAT[k]
            k += 1
            lines = chat[:2] + content[:3] + chat[2:3] + content[3:] + chat[3:]
            labels = [0, 0, 1, 1, 1, 0, 1, 1, 1, 0, 0]
            timed = _timed(lines)
            segments = [(timed[2][0], timed[4][1]), (timed[6][0], timed[8][1])]
            vid = f"toy{rtype}v{j}"
            videos[vid] = YouCook2Video(vid, timed[-1][1] + 3.0, "training", rtype, segments, ["step"] * 2)
            transcripts[vid] = Transcript(vid, timed, RAW_CAPTION_SOURCE)
            intended[vid] = labels
    return videos, transcripts, intended


@pytest.fixture(scope="module")
def minilm():
    from builders.models.text_encoder import get_encoder

    return get_encoder("minilm")


@pytest.fixture(scope="module")
def toy():
    videos, transcripts, intended = toy_corpus()
    rows, drops, counts = labelled_sentences(videos, transcripts)
    return rows, drops, counts, intended


@pytest.fixture(scope="module")
def model(toy, minilm):
    return train_logreg(toy[0], minilm)


# --------------------------------------------------------------------------------------------- sentences, labels


def test_labelled_sentences_raw_captions_hand_computed(tmp_path):
    raw = {
        # unpunctuated lines: one line = one sentence; segments [10, 20] and [30, 40]
        "vidAAAAAAA1": {"text": ["hey guys welcome back", "first add the flour", "then the sugar goes in",
                                 "so how was your week", "mix", "bye guys"],
                        "start": [0, 8, 16, 24, 35, 45], "end": [8, 14, 24, 31, 35, 50]},
        # >= 30 % lines end a sentence: joined, punkt-split, times by character offset
        "vidAAAAAAA2": {"text": ["Add the salt. Stir it.", "Thanks for watching."], "start": [0, 10], "end": [10, 14]},
        "vidAAAAAAA4": {"text": "not a list", "start": [0], "end": [1]},
        "vidAAAAAAA5": {"text": ["", "  ", "♪ ♪"], "start": [0, 1, 2], "end": [1, 2, 3]},
    }
    path = tmp_path / "raw_caption.json"
    path.write_text(json.dumps(raw))
    store = open_transcripts(path, tmp_path / "work")
    videos = {
        "vidAAAAAAA1": YouCook2Video("vidAAAAAAA1", 60.0, "training", "101", [(10, 20), (30, 40)], ["a", "b"]),
        "vidAAAAAAA2": YouCook2Video("vidAAAAAAA2", 20.0, "training", "101", [(6, 20)], ["c"]),
        "vidAAAAAAA3": YouCook2Video("vidAAAAAAA3", 20.0, "validation", "102", [(6, 20)], ["c"]),
        "vidAAAAAAA4": YouCook2Video("vidAAAAAAA4", 20.0, "validation", "102", [(6, 20)], ["c"]),
        "vidAAAAAAA5": YouCook2Video("vidAAAAAAA5", 20.0, "validation", "102", [(6, 20)], ["c"]),
    }
    rows, drops, counts = labelled_sentences(videos, store)
    assert {d.item_id: d.reason for d in drops} == {"vidAAAAAAA3": "no_transcript",
                                                     "vidAAAAAAA4": "malformed_transcript",
                                                     "vidAAAAAAA5": "empty_transcript"}
    v1 = [r for r in rows if r["video_id"] == "vidAAAAAAA1"]
    assert [(r["sentence"], r["start"], r["end"]) for r in v1] == [
        ("hey guys welcome back", 0, 8), ("first add the flour", 8, 14), ("then the sugar goes in", 16, 24),
        ("so how was your week", 24, 31), ("mix", 35, 35), ("bye guys", 45, 50)]
    # overlap with [10,20] u [30,40]: 0/8, 4/6, 4/8 (= 50 %: content), 1/7, zero-length midpoint 35 inside, 0/5
    assert [r["label"] for r in v1] == [0, 1, 1, 0, 1, 0]
    v2 = [r for r in rows if r["video_id"] == "vidAAAAAAA2"]
    # "Add the salt. Stir it." = 22 characters over 10 s: "Stir it." starts at character 14 -> 140/22 s;
    # "Add the salt." ends where character 13 (the space) starts -> 130/22 s
    assert [r["sentence"] for r in v2] == ["Add the salt.", "Stir it.", "Thanks for watching."]
    assert [r["start"] for r in v2] == pytest.approx([0, 140 / 22, 10])
    assert [r["end"] for r in v2] == pytest.approx([130 / 22, 10, 14])
    # [0, 5.909]: 0 s in [6, 20] -> chat; [6.364, 10] inside -> content; [10, 14] inside -> content
    assert [r["label"] for r in v2] == [0, 1, 1]
    assert all(r["recipe_type"] == "101" and r["duration"] in (60.0, 20.0) for r in rows)
    assert {r["split"] for r in rows} == {"test"}  # one recipe type: it fills the test split
    assert counts["sentences"] == 9 and counts["test_content"] == 5 and counts["test_chat"] == 4
    assert counts["videos_labelled"] == 2


def test_split_covers_train_validation_test(toy):
    rows, drops, counts, intended = toy
    assert drops == []
    per_type = Counter(r["recipe_type"] for r in rows)
    assert len(per_type) == 8 and set(per_type.values()) == {22}
    expected = recipe_type_split(per_type)
    assert {r["split"] for r in rows} == {"train", "validation", "test"}
    assert all(r["split"] == expected[r["recipe_type"]] for r in rows)
    n = Counter(r["split"] for r in rows)
    # 8 equal types: one type (12.5 %) reaches the test fraction, the next the validation one, 6 remain
    assert n == {"test": 22, "validation": 22, "train": 132}
    assert n["test"] >= TEST_FRACTION * len(rows) and n["validation"] >= VALIDATION_FRACTION * len(rows)
    # sentence boundaries = line boundaries, segments = the content lines: labels as written
    for vid, labels in intended.items():
        assert [r["label"] for r in rows if r["video_id"] == vid] == labels
    assert counts["train_content"] == 72 and counts["train_chat"] == 60


def test_whisperx_words_give_sentence_times(tmp_path):
    words = [{"word": "Hello", "start": 0.5, "end": 0.9}, {"word": "friends.", "start": 1.0, "end": 1.4},
             {"word": "Chop", "start": 3.0, "end": 3.2}, {"word": "the"},  # untimed: interpolated
             {"word": "onions.", "start": 3.8, "end": 4.5}]
    obj = {"segments": [{"start": 0.5, "end": 1.4, "text": "Hello friends.", "words": words[:2]},
                        {"start": 3.0, "end": 4.5, "text": "Chop the onions.", "words": words[2:]}],
           "language": "en"}
    (tmp_path / "vidWX000001.json").write_text(json.dumps(obj))
    store = open_transcripts(tmp_path, tmp_path / "work")
    transcript, got_words = cc.read_transcript(store, "vidWX000001")
    assert got_words is not None and got_words[3] == ("the", None, None)
    assert transcript_sentences(transcript, got_words) == [("Hello friends.", 0.5, 1.4), ("Chop the onions.", 3.0, 4.5)]
    video = YouCook2Video("vidWX000001", 5.0, "training", "104", [(2.9, 5.0)], ["chop"])
    rows, drops, _ = labelled_sentences({"vidWX000001": video}, store)
    assert drops == [] and [(r["label"], r["start"]) for r in rows] == [(0, 0.5), (1, 3.0)]
    # words without any time: the segments are used as caption lines
    for w in obj["segments"][0]["words"] + obj["segments"][1]["words"]:
        w.pop("start", None)
        w.pop("end", None)
    assert cc.whisperx_words(obj) is None


def test_effective_duration_and_features(minilm):
    assert cc.effective_duration(120.0, [3.0, 50.0]) == 120.0
    assert cc.effective_duration(None, [3.0, 50.0, float("nan")]) == 50.0
    assert cc.effective_duration(float("nan"), []) == 0.0
    x = cc.features(["Add the flour and mix well.", "Subscribe!"], [0.0, 90.0], [10.0, 100.0], 100.0, minilm)
    assert x.shape == (2, 384 + 5) and x.dtype == np.float32
    assert np.allclose(np.linalg.norm(x[:, :384], axis=1), 1.0, atol=1e-5)
    # r = 5/100 and 95/100; words 6 and 1
    assert np.allclose(x[0, 384:], [0.05, 0.0025, 1, 0, np.log(7)], atol=1e-6)
    assert np.allclose(x[1, 384:], [0.95, 0.9025, 0, 1, np.log(2)], atol=1e-6)
    per_row = cc.features(["Add the flour and mix well.", "Subscribe!"], [0.0, 90.0], [10.0, 100.0],
                          [200.0, 100.0], minilm)
    assert np.allclose(per_row[0, 384:386], [0.025, 0.025**2]) and np.allclose(per_row[1], x[1])


def test_content_scores_hand_computed():
    s = cc.content_scores([1, 1, 1, 0, 0], [1, 0, 1, 1, 0])
    assert (s["precision"], s["recall"]) == pytest.approx((2 / 3, 2 / 3)) and s["f1"] == pytest.approx(2 / 3)
    assert cc.content_scores([0, 0], [0, 0])["f1"] == 0.0


# --------------------------------------------------------------------------------------------- training, model file


def test_train_logreg_beats_all_content_baseline(model, toy):
    rows = toy[0]
    sc = model.scores
    assert model.embedding_model == "sentence-transformers/all-MiniLM-L6-v2"
    assert model.coef.shape == (389,) and model.C in (0.01, 0.1, 1.0, 10.0) and model.threshold == 0.5
    assert sc["counts"] == {"train": {"chat": 60, "content": 72}, "validation": {"chat": 10, "content": 12},
                            "test": {"chat": 10, "content": 12}}
    # 12 content of 22: predicting all content gives F1 = 2 * (12/22) / (1 + 12/22) = 0.7059
    assert sc["baseline_all_content_f1"]["test"] == pytest.approx(24 / 34)
    for split in ("validation", "test"):
        print(split, {k: round(v, 4) if isinstance(v, float) else v for k, v in sc[split].items()})
        assert sc[split]["f1"] >= 0.9 > sc["baseline_all_content_f1"][split] + 0.15
    best = max(g["validation_f1"] for g in sc["c_grid"])
    assert model.C == min(g["C"] for g in sc["c_grid"] if g["validation_f1"] == best)  # ties -> smaller C
    # the reported test scores are what predict() gives
    from builders.models.text_encoder import get_encoder

    test = [r for r in rows if r["split"] == "test"]
    pred = model.predict([r["sentence"] for r in test], [r["start"] for r in test], [r["end"] for r in test],
                         [r["duration"] for r in test], get_encoder("minilm"))
    assert cc.content_scores([r["label"] for r in test], pred) == sc["test"]


def test_training_is_deterministic(model, toy, minilm):
    again = train_logreg(toy[0], minilm)
    assert again.fingerprint() == model.fingerprint() and again.C == model.C


def test_train_needs_both_labels_and_validation(toy, minilm):
    rows = toy[0]
    with pytest.raises(ValueError, match="train split needs chat and content"):
        train_logreg([r for r in rows if not (r["split"] == "train" and r["label"] == 0)], minilm)
    with pytest.raises(ValueError, match="validation split is empty"):
        train_logreg([r for r in rows if r["split"] != "validation"], minilm)


def test_save_load_round_trip(model, toy, minilm, tmp_path):
    path = model.save(tmp_path / "m" / "chat.json")
    loaded = ChatClassifier.load(path)
    assert loaded.fingerprint() == model.fingerprint() and len(model.fingerprint()) == 12
    assert loaded.name == f"logreg-minilm@{model.fingerprint()}"
    rows = toy[0][:30]
    args = ([r["sentence"] for r in rows], [r["start"] for r in rows], [r["end"] for r in rows], 60.0, minilm)
    assert np.array_equal(loaded.predict_proba(*args), model.predict_proba(*args))
    assert json.loads(path.read_text())["classifier"] == "logreg"
    other = type("Enc", (), {"model_id": "sentence-transformers/all-mpnet-base-v2"})()
    with pytest.raises(ValueError, match="trained on sentence-transformers/all-MiniLM-L6-v2"):
        loaded.predict_proba(*args[:4], other)


@pytest.mark.parametrize("corrupt, message", [
    (lambda text: text[: len(text) // 2], "invalid JSON"),
    (lambda text: "[1, 2, 3]", "not a JSON object"),
    (lambda text: json.dumps({**json.loads(text), "coef": [0.1, 0.2]}), "coef"),
    (lambda text: json.dumps({**json.loads(text), "coef": "abc"}), "coef"),
    (lambda text: text.replace('"intercept":', '"intercept":NaN,"x":'), "invalid JSON"),
    (lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "threshold"}), "missing keys"),
    (lambda text: json.dumps({**json.loads(text), "format": "pickle"}), "format"),
    (lambda text: json.dumps({**json.loads(text), "threshold": 2}), "threshold"),
])
def test_corrupted_model_file_raises_clear_error(model, tmp_path, corrupt, message):
    path = model.save(tmp_path / "chat.json")
    path.write_text(corrupt(path.read_text()))
    with pytest.raises(ValueError, match=message) as err:
        ChatClassifier.load(path)
    assert "chat classifier model" in str(err.value)


def test_cli_trains_and_writes_model(tmp_path, capsys):
    videos, transcripts, _ = toy_corpus()
    raw = {vid: {"text": [t for _, _, t in tr.segments], "start": [s for s, _, _ in tr.segments],
                 "end": [e for _, e, _ in tr.segments]} for vid, tr in transcripts.items()}
    ann = {"database": {vid: {"duration": v.duration, "subset": v.subset, "recipe_type": v.recipe_type,
                              "annotations": [{"segment": list(s), "id": i, "sentence": "x"}
                                              for i, s in enumerate(v.segments)]}
                        for vid, v in videos.items()}}
    (tmp_path / "ann.json").write_text(json.dumps(ann))
    (tmp_path / "raw_caption.json").write_text(json.dumps(raw))
    out = tmp_path / "model.json"
    argv = ["--annotations", str(tmp_path / "ann.json"), "--transcripts", str(tmp_path / "raw_caption.json"),
            "--out", str(out)]
    assert cc.main(argv) == 0
    printed = capsys.readouterr().out
    assert "86.76" in printed and "85.01" in printed and "176 labelled sentences" in printed
    assert ChatClassifier.load(out).name in printed
    # missing input / no labelled sentence: non-zero exit with a message
    assert cc.main(argv[:2] + ["--transcripts", str(tmp_path / "nope.json"), "--out", str(out)]) == 2
    assert "transcripts not found" in capsys.readouterr().err
    (tmp_path / "empty_raw.json").write_text("{}")
    assert cc.main(argv[:2] + ["--transcripts", str(tmp_path / "empty_raw.json"), "--out", str(out)]) == 1
    assert "no labelled sentences" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------- spec §8.7 smoke check


def showhowto_rows(shared_data):
    """The ShowHowTo transcripts with ``llm_steps_reference`` windows, labelled by the §3.5 rule (windows =
    segments; duration = last transcript end, as for a candidate video without a known duration)."""
    items = json.loads((shared_data / "showhowto" / "showhowto_asr_examples.json").read_text(encoding="utf-8"))
    out = []
    for k, item in enumerate(items):
        ref = item.get("llm_steps_reference")
        if not item.get("transcript") or not ref:
            continue
        steps = next(part["steps"] for part in ref if "steps" in part)
        windows = [(s["start_timestamp"], s["end_timestamp"]) for s in steps]
        vid = f"showhowto{k}"
        transcript = Transcript(vid, [(s["start"], s["end"], s["text"]) for s in item["transcript"]],
                                RAW_CAPTION_SOURCE)
        sentences = transcript_sentences(transcript)
        duration = cc.effective_duration(None, [e for _, _, e in sentences])
        video = YouCook2Video(vid, duration, "validation", item["title"], windows, [s["instruction"] for s in steps])
        rows, drops, _ = labelled_sentences({vid: video}, {vid: transcript})
        assert drops == [] and len(rows) == len(sentences)
        out.extend(rows)
    return out


def test_showhowto_smoke_check(model, minilm, shared_data):
    rows = showhowto_rows(shared_data)
    assert len({r["video_id"] for r in rows}) == 2 and len(rows) == 57
    gold = [r["label"] for r in rows]
    pred = np.zeros(len(rows), dtype=bool)
    for vid in {r["video_id"] for r in rows}:
        idx = [i for i, r in enumerate(rows) if r["video_id"] == vid]
        pred[idx] = model.predict([rows[i]["sentence"] for i in idx], [rows[i]["start"] for i in idx],
                                  [rows[i]["end"] for i in idx], rows[idx[0]]["duration"], minilm)
    s = cc.content_scores(gold, pred)
    from sklearn.metrics import precision_recall_fscore_support

    p, r, f, _ = precision_recall_fscore_support(gold, pred, average="binary", pos_label=1, zero_division=0)
    assert (s["precision"], s["recall"], s["f1"]) == pytest.approx((p, r, f))
    base = cc.content_scores(gold, np.ones(len(gold)))["f1"]
    print(f"ShowHowTo smoke check: n={len(gold)} content={sum(gold)} P={100 * p:.2f} R={100 * r:.2f} "
          f"F1={100 * f:.2f} (all-content F1 {100 * base:.2f})")
    assert f > base
