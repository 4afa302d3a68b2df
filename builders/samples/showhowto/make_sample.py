"""Make the bundled ShowHowTo sample (docs/corpora/showhowto.md): generated test-pattern videos, project-
written transcripts, two manifests (``manifest.csv``, the default sample SmolLM2 runs on, and ``manifest_reasons.csv``
with every row), HowTo100M-style metadata, and ``llm_outputs.jsonl`` (recorded answers that make every LLM-dependent
reason code of §10 appear: ``--manifest manifest_reasons.csv --set llm=replay``).

Videos (PyAV, H.264 160x120, ``movflags=faststart``): ``scenes5`` / ``scenes6`` (one background colour and a moving
square per step, 6 s each, sine-tone audio), two spoken procedures for the ASR path (espeak-ng, as the HowToStep
sample), one without audio, one of random bytes (unreadable), one truncated (the header promises 30 s, 10 s decode),
one of 601 s at 1 fps (too long) and one of 1 s (too short for 6 steps). Several manifest rows share a video file with
different transcripts. Committed for reproducibility; tests never run it (espeak-ng is not installed in CI).
Usage: ``python make_sample.py``.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RATE, W, H = 16000, 160, 120
COLOURS = [(200, 80, 60), (60, 160, 90), (70, 90, 190), (210, 180, 60), (150, 70, 170), (60, 170, 180)]

SPOKEN = {
    "speech_tea": ["First, fill the kettle with fresh water and bring it to a boil.",
                   "Put one tea bag in a mug.", "Pour the boiling water over the tea bag.",
                   "Let the tea steep for three minutes, then take out the bag.", "Add a splash of milk and stir."],
    "speech_eggs": ["Crack two eggs into a bowl.", "Whisk the eggs with a fork and add a pinch of salt.",
                    "Melt butter in a frying pan over low heat.", "Pour in the eggs and stir them slowly.",
                    "Take the pan off the heat while the eggs are still soft."],
}


def _seg(start: float, end: float, text: str) -> dict:
    return {"start": start, "end": end, "text": text}


def scene_transcript(lines: list[str], scene_s: float = 6.0) -> list[dict]:
    """One segment per scene, verbatim text with WhisperX's leading space."""
    return [_seg(round(i * scene_s + 0.4, 2), round((i + 1) * scene_s - 0.3, 2), " " + t) for i, t in enumerate(lines)]


TRANSCRIPTS: dict[str, object] = {
    "shwRoastVg1": {"language": "en", "segments": scene_transcript([
        "Today I'm roasting vegetables, first wash the carrots and the peppers.",
        "Cut the carrots into sticks and the peppers into strips.",
        "Put everything on a baking tray and drizzle it with olive oil.",
        "Sprinkle salt, pepper and some dried thyme over the vegetables.",
        "Roast them in the oven at two hundred degrees for twenty five minutes."])},
    "shwPancake1": {"language": "en", "segments": scene_transcript([
        "Let's make pancakes, put the flour and the sugar in a big bowl.",
        "Add two eggs and pour in the milk slowly.",
        "Whisk it all into a smooth batter with no lumps.",
        "Heat a little oil in a frying pan.",
        "Pour a ladle of batter into the pan and cook it until bubbles appear.",
        "Flip the pancake and cook the other side for a minute."])},
    "shwShelf001": [*scene_transcript([
        "I'm putting up a shelf, first mark the height on the wall with a pencil.",
        "Hold the spirit level on the mark and draw a straight line.",
        "Drill two holes on the line and push in the wall plugs.",
        "Screw the brackets to the wall.",
        "Lay the board on the brackets and screw it from below."])],
    "shwVlog0001": {"language": "en", "segments": scene_transcript([
        "Hey guys, welcome back to my channel, today was a crazy day.",
        "We went to the market in the morning and it was so busy.",
        "Then we met my cousin for lunch and talked for hours.",
        "The weather was really nice so we walked by the river.",
        "In the evening we just watched a movie and relaxed.",
        "Thanks for watching, see you in the next vlog."])},
    "shwGarden01": {"language": "en", "segments": scene_transcript([
        "So this is my garden in spring, the tulips are coming up.",
        "Over here I planted some beans last week.",
        "I might move this pot later, not sure yet.",
        "The grass needs cutting but that's for another day.",
        "Anyway, that's the garden for now."])},
    "shwCarWash1": {"language": "en", "segments": scene_transcript([
        "Washing the car, rinse the whole car with the hose first.",
        "Fill a bucket with warm water and car shampoo.",
        "Wash the car from the roof down with a soft mitt.",
        "Rinse off the soap before it dries.",
        "Dry the paint with a microfibre towel.",
        "Clean the windows last with glass cleaner."])},
    "shwPaintWl1": {"language": "en", "segments": scene_transcript([
        "Painting a wall, cover the floor with a dust sheet.",
        "Tape the edges of the skirting board and the window frame.",
        "Cut in around the edges with a small brush.",
        "Roll the paint on the rest of the wall in a W shape.",
        "Let it dry and apply a second coat."])},
    "shwBreadLf1": {"language": "en", "segments": scene_transcript([
        "Making bread, mix flour, yeast, salt and warm water in a bowl.",
        "Knead the dough for ten minutes until it is smooth.",
        "Cover the bowl and let the dough rise for an hour.",
        "Shape the dough into a loaf and put it in a tin.",
        "Bake the loaf for thirty minutes.",
        "Let it cool on a rack before you slice it."])},
    "shwSoupPot1": {"language": "en", "segments": scene_transcript([
        "Vegetable soup, chop an onion, two carrots and a potato.",
        "Fry the onion in a pot until it is soft.",
        "Add the carrots and the potato and cover them with stock.",
        "Simmer the soup for twenty minutes.",
        "Blend the soup until smooth and season it."])},
    "shwKnotTie1": {"language": "en", "segments": scene_transcript([
        "How to tie a tie, drape the tie around your neck, wide end longer.",
        "Cross the wide end over the narrow end.",
        "Bring it up through the loop at the neck.",
        "Pull it down through the front knot.",
        "Slide the knot up and adjust it.",
        "Done, a simple four in hand knot."])},
    "shwPlantPt1": {"language": "en", "segments": scene_transcript([
        "Repotting a plant, water it the day before.",
        "Tip the pot and ease the plant out.",
        "Loosen the roots with your fingers.",
        "Put fresh compost in the new pot and set the plant in.",
        "Fill around it with compost and water it well."])},
    "shwTrunc001": {"language": "en", "segments": scene_transcript([
        "Making a sandwich, toast two slices of bread.", "Spread butter on the toast.",
        "Lay ham and cheese on one slice.", "Add lettuce and tomato.", "Close the sandwich and cut it in half."])},
    "shwLong0001": {"language": "en", "segments": [
        _seg(5.0, 60.0, " Welcome to a long tutorial on building a garden bench."),
        _seg(120.0, 300.0, " Cut the legs and the seat boards to length."),
        _seg(320.0, 580.0, " Screw the frame together and sand the bench.")]},
    "shwShort001": {"language": "en", "segments": [_seg(0.0, 1.0, " Quick tip: fold the towel in thirds.")]},
    "shwGerman01": {"language": "de", "segments": scene_transcript([
        "Heute backen wir einen Kuchen.", "Zuerst die Butter mit dem Zucker verrühren.",
        "Dann die Eier unterrühren.", "Das Mehl dazugeben.", "Eine Stunde backen."])},
    "shwEmpty001": {"language": "en", "segments": [_seg(0.0, 2.0, "   "), _seg(2.0, 4.0, "")]},
}
BAD_JSON = '{"segments": [{"start": 0.0, "end": 2.0, "text": " Cut the'  # a truncated file: malformed_transcript

#: manifest rows: (video_id, video file, title, transcript file or "")
ROWS = [
    ("shwRoastVg1", "scenes5", "Easy Roasted Vegetables", "shwRoastVg1"),
    ("shwPancake1", "scenes6", "Fluffy Pancakes From Scratch", "shwPancake1"),
    ("shwAsrTea01", "speech_tea", "How to Make a Cup of Tea", ""),
    ("shwAsrEgg01", "speech_eggs", "Soft Scrambled Eggs", ""),
    ("shwShelf001", "scenes5", "How to Put Up a Floating Shelf", "shwShelf001"),
    ("shwVlog0001", "scenes6", "Saturday Vlog | Market, Lunch and a Movie", "shwVlog0001"),
    ("shwGarden01", "scenes5", "My Garden in April", "shwGarden01"),
    ("shwCarWash1", "scenes6", "Hand Washing a Car the Right Way", "shwCarWash1"),
    ("shwPaintWl1", "scenes5", "Painting a Wall Like a Pro", "shwPaintWl1"),
    ("shwBreadLf1", "scenes6", "Simple White Bread Loaf", "shwBreadLf1"),
    ("shwSoupPot1", "scenes5", "Blended Vegetable Soup", "shwSoupPot1"),
    ("shwKnotTie1", "scenes6", "Tie a Four-in-Hand Knot", "shwKnotTie1"),
    ("shwPlantPt1", "scenes5", "Repotting a House Plant", "shwPlantPt1"),
    ("shwTrunc001", "truncated", "The Perfect Ham Sandwich", "shwTrunc001"),
    ("shwLong0001", "long", "Build a Garden Bench (Full Tutorial)", "shwLong0001"),
    ("shwShort001", "short", "", "shwShort001"),
    ("shwGerman01", "scenes5", "Einfacher Rührkuchen", "shwGerman01"),
    ("shwEmpty001", "scenes6", "Silent Demo", "shwEmpty001"),
    ("shwBadJson1", "scenes5", "Cutting Onions", "shwBadJson1"),
    ("shwNoAudio1", "silent", "Folding a Paper Plane", ""),
    ("shwBroken01", "broken", "Fixing a Chair", "shwRoastVg1"),
    ("shwRoastVg1", "scenes5", "Easy Roasted Vegetables (again)", "shwRoastVg1"),   # duplicate_video_id
    ("bad id!", "scenes5", "An invalid id", "shwRoastVg1"),                          # invalid_video_id
]
#: the default sample (the one SmolLM2 runs on, under 3 minutes on 2 cores): the five instructional videos, the long
#: one, and every row that ends before the LLM; ``manifest_reasons.csv`` has all rows (with ``llm_outputs.jsonl``)
DEFAULT_IDS = {"shwRoastVg1", "shwPancake1", "shwAsrTea01", "shwAsrEgg01", "shwShelf001", "shwLong0001",
               "shwGerman01", "shwEmpty001", "shwBadJson1", "shwNoAudio1", "shwBroken01", "bad id!"}

#: HowTo100M-style metadata: task per video (categories as HowTo100M's)
META = {"shwRoastVg1": (101, "Food and Entertaining"), "shwPancake1": (102, "Food and Entertaining"),
        "shwAsrTea01": (103, "Food and Entertaining"), "shwAsrEgg01": (104, "Food and Entertaining"),
        "shwShelf001": (105, "Home and Garden"), "shwVlog0001": (106, "Hobbies and Crafts"),
        "shwGarden01": (107, "Home and Garden"), "shwCarWash1": (108, "Cars & Other Vehicles"),
        "shwPaintWl1": (109, "Home and Garden"), "shwBreadLf1": (110, "Food and Entertaining"),
        "shwSoupPot1": (111, "Food and Entertaining"), "shwKnotTie1": (112, "Hobbies and Crafts"),
        "shwPlantPt1": (113, "Home and Garden"), "shwTrunc001": (114, "Food and Entertaining"),
        "shwLong0001": (115, "Home and Garden"), "shwShort001": (116, "Home and Garden")}
TASKS = {101: "Roast Vegetables", 102: "Make Pancakes", 103: "Make Tea", 104: "Make Scrambled Eggs",
         105: "Install a Shelf", 106: "Vlog", 107: "Tend a Garden", 108: "Wash a Car", 109: "Paint a Wall",
         110: "Bake Bread", 111: "Make Vegetable Soup", 112: "Tie a Tie", 113: "Repot a Plant",
         114: "Make a Sandwich", 115: "Build a Bench", 116: "Fold a Towel"}


def _steps(pairs: list[tuple[str, float, float]], title: str) -> str:
    return json.dumps([{"WikiHow Title": title}, {"steps": [
        {"step": i + 1, "instruction": t, "start_timestamp": s, "end_timestamp": e}
        for i, (t, s, e) in enumerate(pairs)]}])


def replay_lines() -> list[dict]:
    """Recorded answers: the five ok videos, then one per LLM-dependent reason code (docs/reason-codes.md)."""
    yes = "Yes\nExplanation: The presenter demonstrates each step of the task."
    ok = {
        "shwRoastVg1": _steps([("Wash the carrots and peppers.", 0.4, 5.7), ("Cut the vegetables into strips.", 6.4,
                               11.7), ("Drizzle the vegetables with olive oil on a tray.", 12.4, 17.7),
                               ("Season with salt, pepper and thyme.", 18.4, 23.7),
                               ("Roast at 200 degrees for 25 minutes.", 24.4, 29.7)], "How to Roast Vegetables"),
        "shwPancake1": _steps([("Mix flour and sugar in a bowl.", 0.4, 5.7), ("Add the eggs and milk.", 6.4, 11.7),
                               ("Whisk into a smooth batter.", 12.4, 17.7), ("Heat oil in a pan.", 18.4, 23.7),
                               ("Cook a ladle of batter until bubbles appear.", 24.4, 29.7),
                               ("Flip the pancake and cook the other side.", 30.4, 35.7)], "How to Make Pancakes"),
        "shwAsrTea01": _steps([("Boil water in a kettle.", 0.5, 4.0), ("Put a tea bag in a mug.", 4.0, 6.5),
                               ("Pour boiling water over the tea bag.", 6.5, 9.5),
                               ("Steep for three minutes and remove the bag.", 9.5, 13.5)], "How to Make Tea"),
        "shwAsrEgg01": _steps([("Crack two eggs into a bowl.", 0.5, 2.5), ("Whisk the eggs with salt.", 2.5, 6.0),
                               ("Melt butter in a pan.", 6.0, 9.0), ("Stir the eggs slowly in the pan.", 9.0, 12.0)],
                              "How to Make Scrambled Eggs"),
        "shwShelf001": "```json\n" + _steps([("Mark the height on the wall.", 0.4, 5.7),
                                            ("Draw a level line.", 6.4, 11.7),
                                            ("Drill holes and insert wall plugs.", 12.4, 17.7),
                                            ("Screw the brackets to the wall.", 18.4, 23.7),
                                            ("Screw the board onto the brackets.", 24.4, 29.7)],
                                           "How to Put Up a Shelf")[:-3] + "}]}]\n```",  # a trailing comma: repaired
    }
    lines = []
    for vid, out in ok.items():
        lines += [{"video_id": vid, "stage": "filter", "raw_output": yes},
                  {"video_id": vid, "stage": "keysteps", "raw_output": out}]
    lines += [
        {"video_id": "shwVlog0001", "stage": "filter", "raw_output": "No\nExplanation: A personal vlog."},
        {"video_id": "shwGarden01", "stage": "filter", "raw_output": "It is not clear from the transcript."},
        {"video_id": "shwCarWash1", "stage": "filter", "raw_output": yes},
        {"video_id": "shwCarWash1", "stage": "keysteps", "raw_output": "I am sorry, I cannot extract steps."},
        {"video_id": "shwPaintWl1", "stage": "filter", "raw_output": yes},
        {"video_id": "shwPaintWl1", "stage": "keysteps", "raw_output": _steps(
            [("Cover the floor.", 0.4, 5.7), ("Tape the edges.", 11.7, 6.4)], "How to Paint a Wall")},
        {"video_id": "shwBreadLf1", "stage": "filter", "raw_output": yes},
        {"video_id": "shwBreadLf1", "stage": "keysteps", "finish_reason": "length",
         "raw_output": _steps([("Mix the dough.", 0.4, 5.7)], "How to Bake Bread")[:40]},
        {"video_id": "shwSoupPot1", "stage": "filter", "raw_output": yes},
        {"video_id": "shwSoupPot1", "stage": "keysteps", "raw_output": _steps(
            [("Fry the onion.", 6.4, 11.7), ("Chop the vegetables.", 0.4, 5.7)], "How to Make Soup")},
        {"video_id": "shwKnotTie1", "stage": "filter", "raw_output": yes},
        {"video_id": "shwKnotTie1", "stage": "keysteps", "raw_output": _steps(
            [("Drape the tie around the neck.", 0.4, 5.7)], "How to Tie a Tie")},
        {"video_id": "shwPlantPt1", "stage": "filter", "raw_output": yes},   # no keysteps line: llm_error
        {"video_id": "shwTrunc001", "stage": "filter", "raw_output": yes},
        {"video_id": "shwTrunc001", "stage": "keysteps", "raw_output": _steps(
            [("Toast two slices of bread.", 0.4, 5.7), ("Butter the toast.", 6.4, 11.7),
             ("Add ham and cheese.", 12.4, 17.7), ("Cut the sandwich in half.", 24.4, 29.7)], "How to Make a Sandwich")},
        {"video_id": "shwLong0001", "stage": "filter", "raw_output": yes},
        {"video_id": "shwShort001", "stage": "filter", "raw_output": yes},
        {"video_id": "shwShort001", "stage": "keysteps", "raw_output": _steps(
            [(f"Fold part {i}.", 0.0, 1.0) for i in range(8)], "How to Fold a Towel")},
    ]
    return lines


def write_video(path: Path, seconds: float, fps: int, scene_s: float | None, audio: np.ndarray | None,
                scene_times: list[float] | None = None) -> None:
    import av

    n = round(seconds * fps)
    with av.open(str(path), "w", options={"movflags": "faststart"}) as c:
        v = c.add_stream("libx264", rate=fps, options={"crf": "32", "preset": "veryslow", "threads": "1",
                                                        "g": str(fps * 2)})
        v.width, v.height, v.pix_fmt = W, H, "yuv420p"
        a = None
        if audio is not None:
            a = c.add_stream("aac", rate=RATE, options={"b": "24k"})
            a.layout = "mono"
        size, done = (a.codec_context.frame_size or 1024) if a else 1024, 0
        for i in range(n):
            t = i / fps
            if scene_times is not None:
                k = max(0, sum(1 for s in scene_times if s <= t) - 1)
            else:
                k = int(t // scene_s) if scene_s else 0
            img = np.empty((H, W, 3), np.uint8)
            img[:] = COLOURS[k % len(COLOURS)]
            x0 = int((i * 4) % (W - 24))
            img[40 + 10 * (k % 4):64 + 10 * (k % 4), x0:x0 + 24] = 255
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            frame.pts = i
            c.mux(v.encode(frame))
            if a is not None:
                while done < min(audio.size, int((i + 1) * RATE / fps)):
                    chunk = audio[None, done:done + size].copy()
                    af = av.AudioFrame.from_ndarray(chunk, format="flt", layout="mono")
                    af.sample_rate, af.pts = RATE, done
                    c.mux(a.encode(af))
                    done += chunk.shape[1]
        c.mux(v.encode())
        if a is not None:
            c.mux(a.encode())


def spoken_audio(lines: list[str], tmp: Path) -> tuple[np.ndarray, list[float]]:
    from builders.samples.howtostep.make_media import speak

    pieces, starts, t = [np.zeros(RATE // 2, np.float32)], [], 0.5
    for s in lines:
        x = speak(s, tmp)
        starts.append(t)
        pieces += [x, np.zeros(int(0.6 * RATE), np.float32)]
        t += x.size / RATE + 0.6
    return np.concatenate(pieces), starts


def tone(seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (0.1 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def main() -> None:
    vids, trs = HERE / "videos", HERE / "transcripts"
    vids.mkdir(exist_ok=True)
    trs.mkdir(exist_ok=True)
    write_video(vids / "scenes5.mp4", 30, 5, 6.0, tone(30))
    write_video(vids / "scenes6.mp4", 36, 5, 6.0, tone(36))
    write_video(vids / "silent.mp4", 20, 5, 5.0, None)
    write_video(vids / "short.mp4", 1, 5, 1.0, tone(1))
    write_video(vids / "long.mp4", 601, 1, 60.0, None)
    full = vids / "truncated_full.mp4"
    write_video(full, 30, 5, 6.0, tone(30))
    data = full.read_bytes()
    (vids / "truncated.mp4").write_bytes(data[: len(data) // 3])  # header (faststart) + the first third
    full.unlink()
    (vids / "broken.mp4").write_bytes(np.random.default_rng(0).integers(0, 256, 4096, np.uint8).tobytes())
    with tempfile.TemporaryDirectory() as d:
        for name, lines in SPOKEN.items():
            audio, starts = spoken_audio(lines, Path(d))
            write_video(vids / f"{name}.mp4", audio.size / RATE, 5, None, audio, scene_times=starts)
    for vid, obj in TRANSCRIPTS.items():
        (trs / f"{vid}.json").write_text(json.dumps(obj, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    (trs / "shwBadJson1.json").write_text(BAD_JSON, encoding="utf-8")
    import csv

    for name, ids in (("manifest.csv", DEFAULT_IDS), ("manifest_reasons.csv", None)):
        with (HERE / name).open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["video_id", "video_path", "title", "transcript_path"])
            for vid, video, title, tr in ROWS:
                if ids is None or vid in ids:
                    w.writerow([vid, f"videos/{video}.mp4", title, f"transcripts/{tr}.json" if tr else ""])
    with (HERE / "HowTo100M_v1.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["video_id", "category_1", "category_2", "rank", "task_id"])
        for vid, (task, cat) in META.items():
            w.writerow([vid, cat, "", 1, task])
    (HERE / "task_ids.csv").write_text("".join(f"{k}\t{v}\n" for k, v in TASKS.items()), encoding="utf-8")
    (HERE / "llm_outputs.jsonl").write_text("".join(json.dumps(x) + "\n" for x in replay_lines()), encoding="utf-8")


if __name__ == "__main__":
    main()
