"""Write the sample's WhisperX transcripts (``transcripts/<vid>.json``) from the hand-written segments below.

Usage (from anywhere)::

    python builders/samples/howtostep/make_transcripts.py            # rewrites transcripts/ next to this script
    python builders/samples/howtostep/make_transcripts.py --out DIR  # writes the json files into DIR instead
    python builders/samples/howtostep/make_transcripts.py --check    # writes nothing: prints the per-video summary
                                                                     # and exits 1 if transcripts/ is out of date

Output format (spec ``howtostep.md`` §2.2, ``whisperx``)::

    {"segments": [{"start", "end", "text", "words": [{"word", "start", "end", "score"}]}],
     "word_segments": [...every word of every segment, in order...], "language": "en"}

Every sentence below was written by hand for this project (CC0-1.0); none comes from YouTube, HowTo100M or any
WhisperX release. A segment is ``(start, text)`` or ``(start, end, text)`` in seconds; without an end, the segment
lasts ``max(1.0, words / 2.7)`` seconds (about 2.7 spoken words per second). Like real WhisperX output, segment
texts start with a space, a segment may hold two sentences or half of one, and words are spread linearly over their
segment (each takes 90% of an equal slot, the last one ends with the segment) with timestamps rounded to 3 decimals.
Words holding a digit get no ``start``/``end``/``score`` (WhisperX's wav2vec2 aligner cannot align numerals);
every other word gets a deterministic score in [0.50, 0.99] from an md5 of (video, segment, word index, word).
A segment listed in :data:`NO_WORDS` is written without its ``words`` list (allowed by §2.2).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORDS_PER_SECOND = 2.7
MIN_SEGMENT_SECONDS = 1.0
MIN_GAP = 0.1  # a derived segment end must stay this far before the next segment's start
_DIGIT = re.compile(r"\d")
_CLOSERS = "\"')]}”’"

Seg = tuple[float, str] | tuple[float, float, str]

LANGUAGE: dict[str, str] = {"Es1kC5jVn8T": "es"}  # every other video is "en"
NO_WORDS: set[tuple[str, int]] = {("Rb4dT6mYq1U", 5)}  # (video id, segment index) written without "words"

VIDEOS: dict[str, list[Seg]] = {
    # ---- pancakes: 20 sentences, 2 chunks; sentence 3 runs over two segments (the first ends on an untimed numeral)
    "Pk3nQ8vTz1L": [
        (0.8, "Hey everyone, welcome back to the kitchen, today we're making fluffy pancakes from scratch."),
        (9.0, "If you're new here, don't forget to subscribe and hit the bell."),
        (13.6, "Okay, so first, in a big mixing bowl, add 1 and a half cups of flour, 2 tablespoons of sugar, and 2"),
        (22.0, "teaspoons of baking powder."),
        (24.0, "Then a pinch of salt, and whisk the dry ingredients together."),
        (31.5, "In a second bowl, crack in one egg and pour in a cup and a quarter of milk."),
        (38.8, "Melt 3 tablespoons of butter in the microwave and let it cool a little."),
        (46.0, "My kids always steal the butter, by the way, so I buy a lot of it."),
        (52.5, "Pour the melted butter into the milk and egg and whisk until combined."),
        (59.0, "Now make a well in the middle of the dry ingredients and pour the wet mix in."),
        (65.5, "Stir it gently with a spatula, a few lumps are totally fine."),
        (73.0, "Let the batter rest for five minutes while the pan heats up."),
        (86.0, "Heat a non-stick pan over medium heat"),
        (88.8, "and brush it with a little butter."),
        (92.5, "Scoop about a quarter cup of batter into the pan."),
        (104.0, "Wait until you see bubbles on the top and the edges look dry."),
        (118.0, "Then flip it over with a thin spatula."),
        (121.2, "Cook the other side for about a minute until it's golden brown."),
        (142.0, "Move the pancake to a plate and keep going with the rest of the batter."),
        (190.0, "Stack them up, add a few slices of banana on top and drizzle over some maple syrup."),
        (199.0, "Oh, that's so good, fluffy on the inside and crispy on the edges."),
        (207.0, "Thanks for watching, and I'll see you in the next one."),
    ],
    # ---- guacamole: 17 sentences, 2 chunks (heldout: listed in exclude_ids.txt)
    "Gw7mR2cXh5D": [
        (0.5, "Hi guys, it's taco Tuesday, so of course we need guacamole."),
        (5.5, "This is my go-to recipe, and it only takes five minutes."),
        (10.2, "Start with 3 ripe avocados."),
        (13.5, "Cut them in half around the pit, twist, and scoop the flesh into a bowl."),
        (22.0, "Mash the avocado with a fork, but leave it a bit chunky."),
        (33.0, "Now finely dice half a red onion and add it to the bowl."),
        (44.5, "Chop a handful of fresh cilantro, stems are fine too."),
        (52.0, "I know some people hate cilantro, you can totally skip it."),
        (57.5, "Next, seed one jalapeno and mince it really small."),
        (68.0, "Squeeze in the juice of one lime."),
        (74.0, "Add a good pinch of salt and stir everything together."),
        (84.0, "Taste it, and add more lime or salt if it needs it."),
        (93.0, "Some people add diced tomato, and that's great too."),
        (99.0, "Press plastic wrap right on the surface so it doesn't turn brown."),
        (110.0, "Serve it with tortilla chips."),
        (114.0, "Let me know in the comments how spicy you like yours."),
        (119.0, "See you next week!"),
    ],
    # ---- tomato pasta: 19 sentences, 2 chunks; the id starts with '-'
    "-Tp4kL9sWq2": [
        (0.6, "Hello and welcome, today I'm cooking a really simple tomato pasta for a weeknight dinner."),
        (7.8, "It's just a few ingredients, and you probably have them in your pantry already."),
        (13.5, "Before we start, a quick thank you to everyone who subscribed last week."),
        (19.0, "First, bring a large pot of water to a boil and salt it generously."),
        (34.0, "While the water heats, peel and thinly slice 4 cloves of garlic."),
        (45.5, "Warm 3 tablespoons of olive oil in a wide pan over medium-low heat."),
        (53.0, "Add the garlic and a pinch of chili flakes, and cook until the garlic just turns golden."),
        (63.0, "Careful here, burnt garlic tastes bitter."),
        (67.0, "Pour in one can of crushed tomatoes and a pinch of salt."),
        (76.0, "Let the sauce simmer for about fifteen minutes, stirring now and then."),
        (95.0, "Meanwhile, drop the spaghetti into the boiling water."),
        (100.5, "Cook it one minute less than the package says."),
        (106.0, "My grandmother used to make this every Friday, so it brings back memories."),
        (131.0, "Before draining, save a cup of the pasta water."),
        (137.0, "Drain the spaghetti and add it straight into the sauce."),
        (146.0, "Toss it over the heat with a splash of pasta water until the sauce coats every strand."),
        (158.0, "Tear in a few basil leaves and grate some parmesan on top."),
        (170.0, "And that's dinner, done in twenty minutes."),
        (174.5, "If you make it, tag me, and I'll see you next time."),
    ],
    # ---- pour-over coffee: 17 sentences, 2 chunks
    "Cf9xB3nRv6M": [
        (0.4, "Good morning, everybody."),
        (2.5, "So this is how I make my pour-over coffee every single morning."),
        (7.5, "You'll need a dripper, a paper filter, a kettle and a scale."),
        (14.0, "First, heat the water to about 94 degrees."),
        (22.0, "Put the paper filter in the dripper and rinse it with hot water."),
        (30.5, "This gets rid of the papery taste and warms up the mug."),
        (36.0, "Pour out the rinse water."),
        (40.0, "Now weigh 20 grams of coffee and grind it medium fine, like sea salt."),
        (52.5, "Pour the grounds into the filter and shake it gently to level the bed."),
        (61.0, "Start the timer and pour about 50 grams of water to let the coffee bloom."),
        (70.0, "You can see it bubbling, that's the gas escaping from fresh beans."),
        (102.0, "After 30 seconds, pour slowly in small circles up to 320 grams."),
        (118.0, "Try not to pour directly onto the filter paper."),
        (150.0, "Let it all drain through, it should finish around three minutes."),
        (158.0, "Take the dripper off, give the coffee a swirl and enjoy."),
        (164.0, "Honestly, this is the best part of my day."),
        (168.5, "Let me know what beans you're using, and have a great morning!"),
    ],
    # ---- basil seedling (Home and Garden): 15 sentences, 2 chunks
    "Bs2hJ7wKp0Y": [
        (0.5, "Hi friends, welcome back to the garden."),
        (3.5, "It's finally warm enough, so today I'm planting this little basil seedling I bought at the market."),
        (11.0, "Basil loves sun, so pick a spot that gets at least six hours a day."),
        (18.5, "I'm using a pot about twenty centimeters wide with drainage holes in the bottom."),
        (27.0, "Fill it with fresh potting mix, leaving a couple of centimeters at the top."),
        (45.0, "Dig a hole in the middle, a bit bigger than the root ball."),
        (54.0, "Now gently squeeze the plastic pot and slide the seedling out."),
        (62.5, "If the roots are circling, loosen them a little with your fingers."),
        (71.0, "Set it in the hole at the same depth it was growing before."),
        (79.5, "Fill in around it and press the soil down lightly."),
        (98.0, "Water it well until water runs out of the bottom."),
        (110.0, "My cat keeps trying to sit in this pot, which is not helping."),
        (116.0, "Put it in a sunny window or on the balcony."),
        (122.5, "In a few weeks, pinch off the top leaves so it grows bushy."),
        (130.0, "That's it, happy gardening and see you soon!"),
    ],
    # ---- bicycle inner tube (Cars & Other Vehicles): 20 sentences, 2 chunks (heldout)
    "Bk5tY1qZr8N": [
        (0.7, "Hey, welcome back to the workshop."),
        (3.5, "Got a flat tyre this morning on the way to work, so let's fix it together."),
        (9.6, "You'll need two tyre levers, a new inner tube and a pump."),
        (15.0, "First, shift onto the smallest cog so the wheel comes out easily."),
        (23.0, "Open the brake quick release and then open the wheel's quick release lever."),
        (32.0, "Pull the wheel out of the frame."),
        (48.0, "Let all the remaining air out of the tube by pressing the valve."),
        (56.0, "Hook one tyre lever under the edge of the tyre and clip it to a spoke."),
        (66.0, "Put the second lever in a few centimeters along and slide it around the rim."),
        (77.0, "Once one side of the tyre is off, pull the old tube out."),
        (98.0, "Run your fingers carefully around the inside of the tyre to find whatever caused the puncture."),
        (108.5, "Ah, there it is, a tiny piece of glass."),
        (113.0, "Pick it out, otherwise your new tube will go flat straight away."),
        (135.0, "Pump a little air into the new tube so it holds its shape."),
        (143.0, "Push the valve through the hole in the rim and tuck the tube inside the tyre."),
        (165.0, "Now push the tyre bead back onto the rim with your thumbs, starting at the valve."),
        (184.0, "Check that the tube isn't pinched between the tyre and the rim."),
        (205.0, "Pump the tyre up to the pressure written on the sidewall."),
        (214.0, "Put the wheel back in the frame, close the quick release and the brake."),
        (231.0, "Done, and I'm only ten minutes late for work, so subscribe for more bike fixes!"),
    ],
    # ---- chocolate mug cake: 14 sentences, 2 chunks
    "Mc8vN4dLs3F": [
        (0.5, "Hey guys, it's late, I want something sweet, so we're making a chocolate mug cake."),
        (7.0, "Grab the biggest mug you own."),
        (9.5, "Add 4 tablespoons of flour, 3 tablespoons of sugar and 2 tablespoons of cocoa powder."),
        (18.0, "Add a pinch of baking powder and a tiny pinch of salt, then mix it with a fork."),
        (27.0, "Pour in 3 tablespoons of milk and 2 tablespoons of vegetable oil."),
        (34.5, "Stir until there are no dry bits left at the bottom of the mug."),
        (43.0, "Drop in a handful of chocolate chips and push them in a little."),
        (50.0, "Microwave it for about seventy seconds."),
        (73.0, "Don't open the door too early, it will sink."),
        (78.0, "It should look set on top but still a little gooey."),
        (83.0, "Let it cool for a minute, because it is lava hot."),
        (88.5, "Add a scoop of vanilla ice cream on top."),
        (93.0, "Oh my goodness, that's dangerous."),
        (96.5, "Thanks for hanging out, bye!"),
    ],
    # ---- french toast: 18 sentences, 2 chunks
    "Ft6_wE2gHk9": [
        (0.6, "Hi everyone, happy Sunday!"),
        (2.8, "Today I'm making French toast with some bread that's a couple of days old."),
        (8.5, "Stale bread actually works better because it soaks up the custard without falling apart."),
        (15.5, "In a shallow dish, whisk 2 eggs with half a cup of milk."),
        (24.5, "Add a teaspoon of vanilla, a pinch of cinnamon and a spoon of sugar, and whisk again."),
        (35.0, "Cut the bread into thick slices, about two centimeters."),
        (44.0, "Heat a frying pan over medium heat and melt a knob of butter."),
        (53.5, "Dip each slice in the egg mixture for a few seconds on each side."),
        (62.0, "Don't leave it too long or it gets soggy."),
        (66.5, "Lay the slices in the hot pan."),
        (85.0, "Fry them for about two minutes, until the bottom is golden."),
        (94.0, "Flip them and cook the other side the same way."),
        (115.0, "If you're making a big batch, keep the finished slices warm in the oven."),
        (123.5, "My brother likes his with bacon, which I think is a bit weird."),
        (130.0, "Dust them with powdered sugar and add some fresh berries."),
        (138.5, "Finish with a drizzle of maple syrup."),
        (144.0, "Honestly, it's the best breakfast."),
        (147.5, "Like and subscribe if you want more brunch ideas, bye!"),
    ],
    # ---- off-topic vlog: 10 sentences of chatter, no procedure, 1 chunk
    "Vl0gX7pQm4C": [
        (0.5, "Hey guys, so it's been a crazy week and I just wanted to sit down and catch up with you."),
        (8.0, "I know I promised a banana bread video, but honestly I didn't get to the store."),
        (14.5, "We went to my sister's wedding on Saturday, and it was so beautiful."),
        (21.0, "The weather was perfect, and my little nephew danced the whole night."),
        (35.0, "Then on Sunday I was so tired that we just ordered pizza and watched movies."),
        (43.0, "A lot of you asked about my new camera, so I'll do a gear video soon."),
        (50.5, "Also, thank you so much for two thousand subscribers, that's crazy to me."),
        (70.0, "Next week I'm going on a little road trip up the coast, so maybe I'll vlog that."),
        (78.0, "Let me know in the comments what you want to see next."),
        (83.5, "Okay, that's it for today, love you guys, bye!"),
    ],
    # ---- Spanish tortilla de patatas: "language": "es" -> not_english
    "Es1kC5jVn8T": [
        (0.5, "Hola a todos, bienvenidos de nuevo a mi cocina."),
        (4.5, "Hoy vamos a preparar una tortilla de patatas muy fácil."),
        (9.5, "Primero pelamos 4 patatas y las cortamos en láminas finas."),
        (18.0, "Calentamos abundante aceite de oliva en una sartén a fuego medio."),
        (26.5, "Añadimos las patatas con una cebolla picada y un poco de sal."),
        (40.0, "Mientras tanto, batimos 5 huevos en un bol grande."),
        (48.0, "Escurrimos las patatas y las mezclamos con el huevo."),
        (57.0, "Cuajamos la tortilla unos minutos y le damos la vuelta con un plato."),
        (70.0, "¡Y listo, a disfrutar!"),
        (78.0, "No olvides suscribirte al canal, hasta la próxima."),
    ],
    # ---- too short: 3 sentences -> too_few_narrations (min_narrations = 5)
    "Sh0rT9bXw2A": [
        (0.4, "Quick tip for iced coffee."),
        (2.5, "Freeze leftover coffee in an ice cube tray, so your drink never gets watered down."),
        (8.5, "That's it, follow for more tips!"),
    ],
    # ---- robustness: a negative start (segment 0) and an end before its start (segment 4) -> 2 bad_timestamp
    # sentences; segment 5 has no "words" list; 9 good sentences remain (1 chunk)
    "Rb4dT6mYq1U": [
        (-3.2, 0.4, "Okay, we're rolling."),
        (0.6, "Hey, it's so hot today, so let's make fresh lemonade."),
        (5.0, "Juice 6 lemons until you have about one cup of juice."),
        (14.5, "Pour the juice through a strainer to catch the seeds."),
        (22.0, 19.5, "Sorry, the seeds always get everywhere."),
        (27.0, "In a small pot, heat one cup of water with one cup of sugar until it dissolves."),
        (41.0, "Let the syrup cool down."),
        (55.0, "Mix the syrup and the lemon juice in a big jug with four cups of cold water."),
        (66.0, "Add plenty of ice and a few lemon slices."),
        (72.5, "Give it a stir and taste it."),
        (78.0, "Cheers, stay cool out there!"),
    ],
}


def _score(vid: str, seg_index: int, word_index: int, word: str) -> float:
    digest = hashlib.md5(f"{vid}:{seg_index}:{word_index}:{word}".encode()).hexdigest()
    return round(0.5 + (int(digest[:8], 16) % 50) / 100, 2)


def _timed(segments: list[Seg]) -> list[tuple[float, float, str]]:
    """``(start, end, text)`` per segment; a derived end must leave :data:`MIN_GAP` before the next start."""
    out = []
    for i, seg in enumerate(segments):
        if len(seg) == 3:
            out.append((float(seg[0]), float(seg[1]), seg[2]))
            continue
        start, text = seg
        end = round(start + max(MIN_SEGMENT_SECONDS, len(text.split()) / WORDS_PER_SECOND), 1)
        nxt = segments[i + 1][0] if i + 1 < len(segments) else None
        if nxt is not None and end > nxt - MIN_GAP:
            raise ValueError(f"segment {i} ({start} s, {text[:30]!r}) needs until {end} s, next starts at {nxt} s")
        out.append((float(start), end, text))
    return out


def _words(vid: str, seg_index: int, start: float, end: float, text: str) -> list[dict]:
    tokens = text.split()
    slot = (end - start) / len(tokens)
    words = []
    for j, token in enumerate(tokens):
        if _DIGIT.search(token):
            words.append({"word": token})  # numerals are not aligned by WhisperX
            continue
        w_end = end if j == len(tokens) - 1 else start + (j + 0.9) * slot
        words.append({"word": token, "start": round(start + j * slot, 3), "end": round(w_end, 3),
                      "score": _score(vid, seg_index, j, token)})
    return words


def whisperx_json(vid: str, segments: list[Seg]) -> dict:
    """The WhisperX-form transcript of one video (see the module docstring)."""
    out_segments, word_segments = [], []
    for i, (start, end, text) in enumerate(_timed(segments)):
        seg = {"start": round(start, 3), "end": round(end, 3), "text": " " + text}
        if (vid, i) not in NO_WORDS:
            seg["words"] = _words(vid, i, start, end, text)
            word_segments.extend(seg["words"])
        out_segments.append(seg)
    return {"segments": out_segments, "word_segments": word_segments, "language": LANGUAGE.get(vid, "en")}


def dump(obj: dict) -> str:
    """The json text with one segment, and one entry of ``word_segments``, per line (diff-friendly)."""
    def one(x: object) -> str:
        return json.dumps(x, ensure_ascii=False)

    segs = ",\n  ".join(one(seg) for seg in obj["segments"])
    words = ",\n  ".join(one(w) for w in obj["word_segments"])
    return (f'{{"segments": [\n  {segs}\n ],\n "word_segments": [\n  {words}\n ],\n'
            f' "language": {one(obj["language"])}}}\n')


def count_sentences(segments: list[Seg]) -> int:
    """Words ending with ``.``, ``!`` or ``?`` after closing quotes/brackets (the sentence cut rule of docs/corpora/howtostep.md)."""
    return sum(w.rstrip(_CLOSERS).endswith((".", "!", "?")) for seg in segments for w in seg[-1].split())


def main(argv: list[str] | None = None) -> None:
    """Write (or with ``--check`` compare) every transcript and print one summary line per video."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "transcripts")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; print the summary and fail if the files under --out differ")
    args = parser.parse_args(argv)
    if not args.check:
        args.out.mkdir(parents=True, exist_ok=True)
    total_chunks, stale = 0, []
    for vid, segments in VIDEOS.items():
        obj = whisperx_json(vid, segments)
        bad = sum(seg["start"] < 0 or seg["end"] < seg["start"] for seg in obj["segments"])  # one sentence each
        n_good = count_sentences(segments) - bad
        chunks = -(-n_good // 10) if obj["language"] == "en" and n_good >= 5 else 0  # §3.2 filters, §3.3 chunks
        total_chunks += chunks
        n_words = sum(len(s[-1].split()) for s in segments)
        print(f"{vid}  {obj['language']}  segments={len(segments):2d} bad_time={bad} sentences={n_good:2d} "
              f"chunks={chunks} words={n_words:3d} last_end={obj['segments'][-1]['end']:6.1f}")
        path = args.out / f"{vid}.json"
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != dump(obj):
                stale.append(path.name)
        else:
            path.write_text(dump(obj), encoding="utf-8")
    print(f"{len(VIDEOS)} videos, {total_chunks} LLM chunks after the language and length filters")
    if stale:
        raise SystemExit(f"out of date (run without --check): {', '.join(stale)}")


if __name__ == "__main__":
    main()
