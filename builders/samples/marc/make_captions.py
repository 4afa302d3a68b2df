"""Write the sample's timed transcripts and YouCook2-format annotations from the hand-written lines below.

Usage (from anywhere)::

    python builders/samples/marc/make_captions.py            # rewrites the four files next to this script
    python builders/samples/marc/make_captions.py --out DIR  # writes them into DIR instead

Outputs (formats of spec ``marc.md`` §2.3 and §2.4):

- ``raw_caption.json``: HowTo100M raw captions ``{video_id: {"text": [...], "start": [...], "end": [...]}}`` of the
  candidate videos in ``video_candidates.jsonl`` (all but ``Wb0Ne6tJk5L``, which has no transcript);
- ``youcook2_annotations.json``: ``{"database": {video_id: {"duration", "subset", "recipe_type", "video_url",
  "annotations": [{"segment": [s, e], "id", "sentence"}]}}}`` with integer-second segments;
- ``youcook2_raw_caption.json``: raw captions of those YouCook2-format videos;
- ``youcook2_label_foodtype.csv``: ``code,name`` of the 8 made-up recipe types, no header (like YouCook2's
  ``label_foodtype.csv``).

Every line was written by hand for this project (CC0-1.0); none comes from YouTube, HowTo100M or YouCook2. Only
the timestamps are computed, deterministically, from each line's word count (about 2.7 words per second, at
least 1.5 s a line; 0.25 s after a chat line and 1.0-3.4 s after a content line, while the cook works; plus the
pauses written as ``[+N]``). In the source lists a line
starting with ``C|`` is chat (greeting, sponsor, tasting, subscribe); other lines are recipe content. The marker is
documentation only and is removed from the output. YouCook2 segments span their content lines plus 2 s before and
3 s after, rounded outwards to whole seconds, with at least 1 s of silence between a segment and the chat around it.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORDS_PER_SECOND = 2.7
MIN_LINE_SECONDS = 1.5
GAP_SECONDS = 0.25  # after a chat line (people chat without pausing)
SEGMENT_MARGIN = 1.0  # silence between a YouCook2 segment and a neighbouring chat line
SEGMENT_PAD = (2, 3)  # seconds of silent cooking a YouCook2 segment spans before its first / after its last line
EMPTY_LINE_SECONDS = 3.0
_PAUSE = re.compile(r"^\[\+(\d+(?:\.\d+)?)\]\s*")

# ------------------------------------------------------------------------------------------------------------------
# Candidate videos of the MARC sample (video_candidates.jsonl). Lowercase and unpunctuated like YouTube's automatic
# captions, except Kc7Wm1pXz9R (punctuated, uploaded subtitles). Ej4Ku0rWp8M is music only: every line is empty.
# ------------------------------------------------------------------------------------------------------------------

MARC_VIDEOS: dict[str, list[str]] = {
    # banana_bread, rank 1
    "Bn4rT8eLq2A": [
        "C|hey guys welcome back to my kitchen",
        "C|today we are making the easiest banana bread ever",
        "C|all you need is one bowl and a fork",
        "[+2]so i've got three really ripe bananas here",
        "the blacker the better honestly",
        "i'm just going to mash them right in the bowl with a fork",
        "then pour in the melted butter and give that a stir",
        "next goes the brown sugar one egg",
        "and a teaspoon of vanilla extract",
        "now sprinkle the baking soda and a little salt over the top",
        "and a pinch of cinnamon if you like",
        "[+1]add the flour and fold it in gently",
        "you don't want to overmix it just until you can't see any flour",
        "pour the batter into a greased loaf pan",
        "and bake it at 350 for about an hour",
        "[+3]check it with a toothpick it should come out clean",
        "let it cool in the pan for ten minutes then turn it out",
        "C|oh wow look at that",
        "C|so this turned out really good",
        "C|it's so moist and it smells amazing",
        "C|if you enjoyed this video don't forget to like and subscribe",
        "C|and i'll see you guys next time bye",
    ],
    # banana_bread, rank 2: punctuated captions (>= 30 % of lines end in '.', '?' or '!')
    "Kc7Wm1pXz9R": [
        "C|Hi everyone, welcome back to the channel!",
        "C|Today I'm going to show you the best banana bread you'll ever make.",
        "C|Before we start, this video is sponsored by Hearthbox, the meal kit I've been loving.",
        "C|Use my code in the description for a discount on your first box.",
        "[+2]Okay, let's get baking.",
        "First, preheat your oven to 350 degrees and grease a loaf pan.",
        "In a large bowl, mash four overripe bananas.",
        "I like to leave a few little lumps of banana in there.",
        "In another bowl, cream half a cup of softened butter",
        "with three quarters of a cup of brown sugar until it's light and fluffy.",
        "Now beat in two eggs, one at a time.",
        "Add the mashed bananas and a teaspoon of vanilla.",
        "In a separate bowl, whisk two cups of flour,",
        "a teaspoon of baking soda and a quarter teaspoon of salt.",
        "Stir the dry ingredients into the banana mixture until just moistened.",
        "Don't overmix it, or the bread will be tough.",
        "Fold in some chopped walnuts if you like.",
        "[+1]Pour it into the pan and bake for about 60 minutes.",
        "[+4]Let it cool in the pan for ten minutes, then move it to a wire rack.",
        "C|Look at that beautiful golden top!",
        "C|Mmm, so good. My husband already ate two slices.",
        "C|Let me know in the comments if you try it.",
        "C|Thanks for watching, and I'll see you in the next one!",
    ],
    # banana_bread, rank 3
    "Yh2Ds5vNb0Q": [
        "C|what's up everyone it's maya",
        "C|so i had some bananas that were going bad",
        "C|and you know what that means banana bread time",
        "[+1]preheat the oven to 175 celsius",
        "line your loaf tin with some baking paper",
        "sift your flour baking soda and salt into a bowl",
        "in another bowl i'm beating the melted butter with the sugar",
        "and then beat in two eggs",
        "now stir in the mashed bananas",
        "and a little splash of vanilla",
        "fold the wet mix into the dry ingredients",
        "just until it's combined",
        "spoon it into the tin and smooth the top",
        "bake for fifty to fifty five minutes until it's risen and golden",
        "[+2]cool it for ten minutes in the tin",
        "then lift it out onto a wire rack",
        "C|okay the moment of truth",
        "C|oh my gosh that's so fluffy",
        "C|comment down below what you want me to bake next",
        "C|bye guys",
    ],
    # banana_bread, rank 4
    "Pq9Lf3jGw6E": [
        "C|hello and welcome to baking with nana",
        "C|i'm here with my granddaughter lily say hi lily",
        "C|hi",
        "C|today we're making my mother's banana bread",
        "[+2]first we turn the oven on to 350",
        "and we butter the pan and put a little flour in it",
        "lily is going to mash the bananas for us",
        "mash them up nice and smooth sweetheart",
        "now the melted butter goes in",
        "then the sugar the egg and the vanilla",
        "stir that all together",
        "now a teaspoon of baking soda and a pinch of salt",
        "and then the flour a little at a time",
        "don't stir it too much just fold it",
        "into the pan it goes",
        "and we bake it for fifty five to sixty five minutes",
        "[+3]C|while that bakes let me tell you a story",
        "C|my mother made this every sunday after church",
        "C|and we kids would fight over the end piece",
        "[+2]there it is all golden",
        "cool it in the pan for ten minutes before you take it out",
        "C|lily what do you think",
        "C|it's yummy",
        "C|thank you for watching and happy baking",
    ],
    # banana_bread, rank 5
    "Tz6Xa0kMu4C": [
        "C|hi guys this is a beginner friendly recipe",
        "C|so if you've never baked before this one's for you",
        "C|let's jump right in",
        "[+1]preheat your oven to 350 fahrenheit",
        "grease your loaf pan really well",
        "take three medium bananas and mash them",
        "pour in half a cup of melted butter",
        "add two thirds of a cup of sugar",
        "one large egg and one teaspoon of vanilla extract",
        "mix that really well",
        "then add a teaspoon of baking soda",
        "half a teaspoon of salt",
        "and one and three quarter cups of flour",
        "mix until the flour is just incorporated",
        "transfer the batter into your pan",
        "bake for about an hour",
        "or until a skewer comes out clean",
        "[+2]let it cool on a wire rack before you slice it",
        "C|and that's it super easy right",
        "C|don't forget to like this video and hit the bell",
        "C|see you next week",
    ],
    # buttermilk_pancakes, rank 1
    "Mf3Rp8sYc1H": [
        "C|good morning everybody welcome back",
        "C|today it's all about fluffy diner style buttermilk pancakes",
        "C|these are my kids favorite weekend breakfast",
        "[+1]in a big bowl whisk two cups of flour",
        "two tablespoons of sugar",
        "a teaspoon and a half of baking powder",
        "half a teaspoon of baking soda and half a teaspoon of salt",
        "in another bowl whisk two cups of buttermilk",
        "two eggs and three tablespoons of melted butter",
        "pour the wet into the dry",
        "and stir it gently with a spatula",
        "a few lumps are totally fine don't overmix it",
        "[+1]heat your griddle over medium heat",
        "brush it with a little butter",
        "scoop about a quarter cup of batter per pancake",
        "wait until you see bubbles on top and the edges look set",
        "then flip them over",
        "cook another minute or two",
        "keep them warm in a low oven while you do the rest",
        "C|look how fluffy these are",
        "C|a little maple syrup on top perfect",
        "C|thanks so much for watching see you next time",
    ],
    # buttermilk_pancakes, rank 3
    "Gv8Hq2uDx7S": [
        "C|hey it's chef tony",
        "C|people always ask me how to make pancakes that are actually fluffy",
        "C|so today i'm going to show you",
        "C|but first a quick word from our sponsor",
        "C|griddlepro makes the best nonstick pans i've ever used",
        "C|check out the link below",
        "[+2]okay combine your flour sugar baking powder baking soda and salt",
        "in a separate bowl beat an egg into your buttermilk",
        "add the melted butter and a little vanilla",
        "make a well in the dry ingredients and pour it in",
        "stir just until combined",
        "and then let the batter rest for five minutes",
        "this lets the baking soda do its thing",
        "[+3]melt a little butter in a nonstick pan on medium low",
        "ladle in the batter",
        "cook until the bottom is golden brown",
        "flip it and cook the second side",
        "serve them warm with maple syrup and butter",
        "C|oh yeah that's what i'm talking about",
        "C|if you liked this hit subscribe",
        "C|peace",
    ],
    # buttermilk_pancakes, rank 4
    "Ra5Zc9wFo3N": [
        "C|hi friends happy sunday",
        "C|grab a coffee and let's make some pancakes together",
        "[+1]i'm sifting two cups of flour into my bowl",
        "three tablespoons of sugar",
        "two teaspoons of baking powder",
        "one teaspoon of baking soda and one teaspoon of salt",
        "now in a jug i'm whisking two eggs",
        "with two and a half cups of buttermilk",
        "and four tablespoons of melted butter that i let cool down",
        "pour the buttermilk mixture into the flour all at once",
        "and fold it until it's thick and lumpy",
        "[+1]my cast iron griddle has been preheating on medium",
        "i'm greasing it lightly with butter",
        "drop the batter by about half a cup",
        "when the tops are full of bubbles flip them",
        "and cook until they're golden on the bottom",
        "C|okay i'm going to taste one",
        "C|so good so fluffy",
        "C|let me know what your sunday breakfast is in the comments",
        "C|bye for now",
    ],
    # guacamole, rank 1
    "Lx1Vb7nQe2T": [
        "C|hola everybody welcome back to my channel",
        "C|today i'm going to show you how we make guacamole at home",
        "C|this is the recipe my family has made for years",
        "[+1]so first cut your avocados in half",
        "and take out the pits",
        "scoop the avocado into a bowl or a molcajete",
        "mash it with a fork but leave some chunks",
        "now squeeze in the juice of one lime",
        "and add half a teaspoon of salt",
        "the lime keeps the avocado nice and green",
        "next i'm adding some diced white onion",
        "a minced jalapeño take the seeds out if you don't like it spicy",
        "one chopped tomato",
        "and some fresh cilantro",
        "mix everything gently",
        "taste it and add more salt if it needs it",
        "C|mmm que rico",
        "C|this is perfect with some tortilla chips",
        "C|if you liked this recipe give it a thumbs up",
        "C|and subscribe for more mexican food",
        "C|hasta luego",
    ],
    # guacamole, rank 2: a music-only short, every caption line empty (empty_transcript)
    "Ej4Ku0rWp8M": [""] * 16,
    # guacamole, rank 3
    "Hs9Ty3aCz6B": [
        "C|yo what's good everybody",
        "C|game day snacks part three",
        "C|today we're making a big bowl of guac",
        "[+1]slice four avocados in half",
        "pop out the pits and scoop them into a big bowl",
        "i'm using a potato masher for this",
        "leave it a little chunky",
        "now the juice of two limes and a teaspoon of salt",
        "mix that in",
        "then half a cup of diced onion",
        "a jalapeño minced up",
        "two cloves of garlic",
        "two tomatoes seeded and diced",
        "and a quarter cup of chopped cilantro",
        "stir it all together",
        "[+1]let it sit for about ten minutes so the flavors can blend",
        "C|and boom that's it",
        "C|grab some chips and you're ready for the game",
        "C|smash that like button",
        "C|see you in the next one",
    ],
    # guacamole, rank 4
    "Od2Mg5hLv1J": [
        "C|hey friends welcome to my kitchen",
        "C|it's avocado season so let's make guacamole",
        "[+1]i've got two ripe avocados here",
        "give them a gentle squeeze they should be a little soft",
        "mash the avocados in a bowl with the juice of a lime",
        "now stir in a quarter of a red onion finely minced",
        "one minced jalapeño",
        "and one diced tomato",
        "season it with half a teaspoon of salt",
        "and a little pinch of ground cumin",
        "that's my secret ingredient",
        "and last some chopped cilantro",
        "mix it well",
        "spoon it into a serving bowl",
        "C|okay let's try it",
        "C|so fresh i love it",
        "C|tell me in the comments do you like it chunky or smooth",
        "C|thanks for watching",
    ],
    # chocolate_chip_cookies, rank 1
    "Cw6Fj1xRn9K": [
        "C|hey everyone welcome back",
        "C|if you love chewy cookies you're going to love these",
        "C|the secret is an extra egg yolk",
        "[+1]first heat your oven to 325",
        "and line two baking sheets with parchment paper",
        "sift together two cups of flour",
        "a teaspoon of baking soda and half a teaspoon of salt",
        "set that aside",
        "in a big bowl cream the melted butter",
        "with a cup of brown sugar and half a cup of white sugar",
        "beat in a tablespoon of vanilla",
        "one egg and one egg yolk until it's light and creamy",
        "mix in the dry ingredients until just blended",
        "then stir in the chocolate chips by hand",
        "[+1]drop the dough about a quarter cup at a time onto the sheets",
        "bake for fifteen to seventeen minutes",
        "until the edges are lightly toasted",
        "[+2]let them cool on the sheets for a few minutes",
        "C|look at those gooey centers",
        "C|oh my goodness so chewy",
        "C|give this video a thumbs up if you want more cookie recipes",
        "C|bye everyone",
    ],
    # chocolate_chip_cookies, rank 2
    "Uy3Pb8dSm4G": [
        "C|hi guys so today's cookie is a little bit fancy",
        "C|we're browning the butter",
        "C|trust me it's worth the extra five minutes",
        "[+1]put the butter in a saucepan over medium heat",
        "keep swirling it until it turns golden and smells nutty",
        "pour it into a bowl and let it cool for fifteen minutes",
        "[+2]now whisk in the brown sugar and the white sugar",
        "then the eggs and the vanilla extract",
        "whisk until it's smooth and glossy",
        "stir in the flour baking soda and salt",
        "fold in the chocolate chips",
        "and now the hard part refrigerate the dough for an hour",
        "[+3]scoop balls of dough onto a lined baking sheet",
        "bake at 350 for eleven minutes",
        "let them cool on the pan",
        "C|these smell incredible",
        "C|honestly the best cookies i've ever made",
        "C|don't forget to subscribe and turn on notifications",
        "C|love you guys",
    ],
    # chocolate_chip_cookies, rank 3
    "Nq7Ae2zVt5D": [
        "C|hello hello welcome back to the cookie jar",
        "C|today we're making classic soft and chewy chocolate chip cookies",
        "C|before we start make sure you're subscribed",
        "[+1]preheat the oven to 375",
        "whisk the flour baking soda and salt in a small bowl",
        "in a large bowl beat the softened butter",
        "with the granulated sugar and the brown sugar until creamy",
        "add the eggs one at a time",
        "beating well after each one",
        "then beat in the vanilla",
        "gradually beat in the flour mixture",
        "and stir in the semisweet chocolate chips",
        "drop rounded tablespoons of dough onto an ungreased baking sheet",
        "bake for nine to eleven minutes until golden brown",
        "cool them on the sheet for two minutes",
        "then move them to a wire rack",
        "C|mmm warm cookies and cold milk",
        "C|it doesn't get better than that",
        "C|see you next week",
    ],
    # chocolate_chip_cookies, rank 4
    "Ik0Sx4gHc8P": [
        "C|hi everyone",
        "C|sometimes you just want a few cookies not fifty",
        "C|so this recipe makes exactly twelve",
        "[+1]whisk half a cup of melted butter with the brown sugar",
        "and the white sugar until it looks glossy",
        "beat in one egg and a teaspoon of vanilla",
        "add the flour baking soda and salt",
        "stir until a soft dough forms",
        "fold in a cup of chocolate chips",
        "[+1]chill the dough for at least thirty minutes",
        "roll it into balls and place them on a lined baking sheet",
        "two inches apart",
        "bake at 350 for ten to twelve minutes",
        "the edges should be set but the middle still soft",
        "C|and there you go twelve perfect cookies",
        "C|one for me one for you",
        "C|thanks for watching",
    ],
}

# ------------------------------------------------------------------------------------------------------------------
# YouCook2-format training set for the chat/content classifier: 8 recipe types x 2 videos. Items are chat lines
# ("C|...") or segments: (annotation sentence, [content caption lines]). Recipe-type codes are made up (501-508) and
# do not follow YouCook2's label_foodtype.csv.
# ------------------------------------------------------------------------------------------------------------------

RECIPE_TYPES = {
    "501": "grilled cheese sandwich",
    "502": "fried rice",
    "503": "tomato pasta",
    "504": "omelette",
    "505": "caesar salad",
    "506": "chicken curry",
    "507": "french toast",
    "508": "beef tacos",
}

Item = str | tuple[str, list[str]]

YOUCOOK2_VIDEOS: dict[str, tuple[str, str, list[Item]]] = {
    "gC5nTq8WzL1": ("501", "training", [
        "C|hey guys welcome back to my channel",
        "C|today we're making the ultimate grilled cheese",
        ("spread butter on one side of each slice of bread", [
            "so i'm spreading softened butter on one side of each slice",
            "all the way to the edges"]),
        ("place cheddar and mozzarella on the unbuttered side", [
            "flip two slices over and layer the cheddar",
            "and a little mozzarella on the plain side"]),
        "C|this is honestly my favorite lunch ever",
        ("cook the sandwich in a pan over medium low heat until golden", [
            "put the top slice on butter side up",
            "and place it in a pan over medium low heat",
            "cook for about three minutes until it's golden"]),
        ("flip the sandwich and cook the other side", [
            "now flip it carefully",
            "and press it down a little with the spatula"]),
        "C|look at that cheese pull",
        "C|so crispy mmm",
        "C|let me know in the comments what cheese you use",
        "C|see you next time",
    ]),
    "Rk2vMx9PaQ4": ("501", "validation", [
        "C|what's up everybody",
        "C|quick lunch idea today nothing fancy",
        ("spread mayonnaise on the outside of the bread", [
            "instead of butter i'm using mayonnaise on the outside",
            "it browns really evenly trust me"]),
        ("add sliced cheese between the bread", [
            "two slices of american cheese",
            "and one slice of swiss in the middle"]),
        ("toast the sandwich on both sides in a skillet", [
            "into a hot skillet it goes",
            "about two minutes per side",
            "until both sides are deep golden brown"]),
        "C|okay that crunch",
        "C|perfect with a bowl of tomato soup",
        "C|subscribe if you want more easy lunches",
    ]),
    "Hf7uDw3YbN6": ("502", "training", [
        "C|hello everyone welcome to my kitchen",
        "C|today i will show you restaurant style fried rice at home",
        ("heat oil in a wok and scramble the eggs", [
            "heat two tablespoons of oil in a wok",
            "pour in three beaten eggs and scramble them quickly",
            "then take them out and set aside"]),
        ("stir fry garlic onion and mixed vegetables", [
            "add a little more oil and the chopped garlic",
            "then the diced onion peas and carrots",
            "stir fry for two minutes"]),
        "C|the smell right now is amazing",
        ("add the cold rice and soy sauce and toss", [
            "now add the day old rice",
            "break up any clumps with your spatula",
            "pour in the soy sauce and toss everything"]),
        ("return the eggs and add green onions", [
            "put the eggs back in",
            "and finish with sliced green onions"]),
        "C|this is better than takeout",
        "C|please like and share this video",
    ]),
    "Vb4sKe0JmT9": ("502", "validation", [
        "C|hi guys",
        "C|leftover rice means fried rice night at our house",
        "C|this video is sponsored by wokstar use code rice ten",
        ("cook diced chicken in oil", [
            "first i'm cooking some diced chicken thighs in oil",
            "until they're no longer pink"]),
        ("add vegetables and cooked rice", [
            "throw in the frozen vegetables",
            "and then all the cooked rice",
            "spread it out so it gets a little crispy"]),
        ("season with soy sauce oyster sauce and sesame oil", [
            "season with soy sauce and a spoon of oyster sauce",
            "and a drizzle of sesame oil at the end"]),
        "C|mmm so good",
        "C|my kids always ask for seconds",
        "C|see you in the next video",
    ]),
    "Lq1aZp6RcX3": ("503", "training", [
        "C|ciao everybody welcome back",
        "C|today a simple tomato pasta like my nonna makes",
        ("boil the pasta in salted water", [
            "bring a big pot of water to a boil",
            "salt it generously",
            "and cook the spaghetti until al dente"]),
        ("saute garlic in olive oil", [
            "meanwhile warm some olive oil in a pan",
            "and add three sliced cloves of garlic"]),
        ("add crushed tomatoes and simmer the sauce", [
            "pour in a can of crushed tomatoes",
            "season with salt and a pinch of chili flakes",
            "let it simmer for ten minutes"]),
        "C|you can smell it through the screen right",
        ("toss the pasta with the sauce and basil", [
            "drain the pasta and add it to the sauce",
            "toss with a splash of pasta water and fresh basil"]),
        "C|buon appetito",
        "C|don't forget to subscribe",
    ]),
    "Td8fWn2GyH5": ("503", "training", [
        "C|hey it's sam",
        "C|fifteen minute dinner coming right up",
        ("cook penne in boiling water", [
            "get the penne into boiling salted water"]),
        ("fry onion and garlic then add tomato paste", [
            "fry half a chopped onion in olive oil",
            "add the minced garlic",
            "then a big spoon of tomato paste and cook it for a minute"]),
        ("add cherry tomatoes and cream", [
            "now the halved cherry tomatoes",
            "and a splash of cream to make it silky"]),
        ("mix in the pasta and top with parmesan", [
            "add the drained penne",
            "and grate lots of parmesan over the top"]),
        "C|honestly so creamy",
        "C|if you make this tag me",
        "C|bye",
    ]),
    "Nw3cYh7KsB2": ("504", "training", [
        "C|good morning everyone",
        "C|breakfast today is a fluffy cheese omelette",
        ("beat the eggs with salt and pepper", [
            "crack three eggs into a bowl",
            "season with salt and pepper",
            "and beat them with a fork until no streaks remain"]),
        ("melt butter in a nonstick pan", [
            "melt a knob of butter in a nonstick pan over medium heat"]),
        ("pour in the eggs and stir gently until almost set", [
            "pour in the eggs",
            "stir gently and push the edges to the middle",
            "until they're almost set"]),
        "C|the key is patience here",
        ("add cheese and fold the omelette", [
            "sprinkle grated cheese on one half",
            "fold the other half over and slide it onto a plate"]),
        "C|perfect every time",
        "C|thanks for watching",
    ]),
    "Ps6mJq1VdF8": ("504", "validation", [
        "C|hi friends",
        "C|i'm making a veggie omelette for lunch",
        "C|i've been eating these every day this week",
        ("saute peppers onion and spinach", [
            "saute diced peppers and onion in a little oil",
            "add a handful of spinach until it wilts"]),
        ("pour whisked eggs over the vegetables", [
            "whisk two eggs with a splash of milk",
            "and pour them over the vegetables"]),
        ("cook until set and fold in half", [
            "let it cook until the top is set",
            "then fold it in half"]),
        "C|so healthy and so good",
        "C|comment your favorite filling",
        "C|and i'll see you tomorrow",
    ]),
    "Xa9bQr4TnE7": ("505", "training", [
        "C|hey everyone",
        "C|today i'm showing you how to make a real caesar dressing from scratch",
        ("make the dressing with garlic anchovy lemon and mayonnaise", [
            "mash one garlic clove and two anchovies into a paste",
            "whisk in lemon juice dijon mustard and mayonnaise",
            "then grated parmesan and black pepper"]),
        ("toast bread cubes in olive oil to make croutons", [
            "toss cubes of bread in olive oil",
            "and bake them until crisp and golden"]),
        "C|these croutons are dangerous i eat half of them",
        ("chop the romaine lettuce", [
            "chop the romaine into bite size pieces"]),
        ("toss the lettuce with dressing croutons and parmesan", [
            "toss the lettuce with the dressing",
            "top with croutons and shaved parmesan"]),
        "C|so fresh",
        "C|like and subscribe for more salads",
    ]),
    "Bd2kVs5LwM0": ("505", "training", [
        "C|welcome back to the channel",
        "C|this is a quick caesar salad with grilled chicken",
        "C|a big thank you to our sponsor greenleaf farms",
        ("grill the seasoned chicken breast", [
            "season the chicken breast with salt pepper and garlic powder",
            "grill it for six minutes per side"]),
        ("slice the chicken", [
            "let it rest and then slice it thinly"]),
        ("combine lettuce dressing and croutons", [
            "in a big bowl combine the chopped romaine",
            "the caesar dressing and a handful of croutons"]),
        ("top the salad with chicken and parmesan", [
            "top with the sliced chicken",
            "and plenty of grated parmesan"]),
        "C|lunch is served",
        "C|see you soon",
    ]),
    "Ju5rGf8CxK1": ("506", "training", [
        "C|hello my friends welcome back",
        "C|today a simple chicken curry for weeknights",
        ("fry onion garlic and ginger", [
            "heat oil in a heavy pot",
            "fry the chopped onion until golden",
            "then add the garlic and ginger"]),
        ("add curry spices and cook briefly", [
            "add the curry powder turmeric and cumin",
            "and cook the spices for one minute"]),
        ("add chicken pieces and brown them", [
            "add the chicken pieces",
            "and stir to coat them in the spices"]),
        "C|the color is so beautiful already",
        ("pour in tomatoes and coconut milk and simmer", [
            "pour in the chopped tomatoes and the coconut milk",
            "cover and simmer for twenty minutes"]),
        "C|serve it with rice or naan",
        "C|please subscribe and ring the bell",
    ]),
    "Ey0wHd3PzR6": ("506", "validation", [
        "C|hi everyone it's priya",
        "C|my mum's chicken curry today",
        "C|it's a little spicy so be warned",
        ("marinate the chicken in yogurt and spices", [
            "mix the chicken with yogurt chili powder and salt",
            "and let it marinate for thirty minutes"]),
        ("cook onions and tomatoes into a masala", [
            "cook sliced onions in oil until soft",
            "add tomatoes and garam masala",
            "and cook until the oil separates"]),
        ("add the chicken and cook until done", [
            "add the marinated chicken",
            "cover and cook on low for twenty five minutes"]),
        "C|that smell takes me back home",
        "C|thank you for watching",
    ]),
    "Mc4pLk9SwT3": ("507", "training", [
        "C|good morning guys",
        "C|french toast sunday is here",
        ("whisk eggs milk cinnamon and vanilla", [
            "whisk three eggs with half a cup of milk",
            "a pinch of cinnamon and a splash of vanilla"]),
        ("dip the bread slices in the egg mixture", [
            "dip each slice of brioche in the egg mixture",
            "let it soak for a few seconds on each side"]),
        "C|brioche is the best bread for this don't @ me",
        ("fry the bread in butter until golden", [
            "melt butter in a skillet over medium heat",
            "fry the bread until golden on both sides"]),
        ("serve with syrup and berries", [
            "serve with maple syrup and fresh berries"]),
        "C|yum",
        "C|see you next sunday",
    ]),
    "Qt7nBv2XhJ4": ("507", "training", [
        "C|hey there",
        "C|this is my oven baked french toast for a crowd",
        "C|perfect for brunch with friends",
        ("arrange bread cubes in a baking dish", [
            "cut a loaf of bread into cubes",
            "and spread them in a buttered baking dish"]),
        ("pour custard over the bread and rest overnight", [
            "whisk eggs milk sugar and cinnamon",
            "pour it over the bread",
            "cover and refrigerate overnight"]),
        ("bake until puffed and golden", [
            "bake at 350 for forty five minutes until puffed and golden"]),
        "C|everyone always asks for this recipe",
        "C|the printable version is linked in the description",
        "C|happy brunching",
    ]),
    "Wp1sFc6DgY9": ("508", "training", [
        "C|what's up taco lovers",
        "C|it's taco tuesday so you know what we're doing",
        ("brown the ground beef with onion", [
            "brown a pound of ground beef with a diced onion",
            "break it up with a wooden spoon",
            "and drain off the fat"]),
        ("add taco seasoning and water", [
            "add chili powder cumin paprika and garlic powder",
            "with a splash of water and simmer for five minutes"]),
        "C|this homemade seasoning beats the packet every time",
        ("warm the tortillas", [
            "warm the tortillas in a dry pan"]),
        ("fill the tortillas with beef lettuce tomato and cheese", [
            "fill each tortilla with the beef",
            "then shredded lettuce diced tomato and cheese"]),
        "C|so good",
        "C|smash that subscribe button",
    ]),
    "Zr3eTm0NqA5": ("508", "validation", [
        "C|hey friends welcome back",
        "C|these are crispy baked beef tacos",
        "C|quick shout out to everyone who commented last week",
        ("cook beef with taco spices", [
            "cook the ground beef in a skillet",
            "stir in the taco spices and a little tomato sauce"]),
        ("fill hard shells with beef and cheese", [
            "stand the hard shells up in a baking dish",
            "fill them with the beef and top with cheese"]),
        ("bake the tacos until the cheese melts", [
            "bake for ten minutes until the cheese is melted"]),
        ("top with salsa and sour cream", [
            "add salsa sour cream and chopped cilantro"]),
        "C|crunchy cheesy perfect",
        "C|my husband gives these a ten out of ten",
        "C|bye guys",
    ]),
}


def _parse(line: str) -> tuple[float, str, bool]:
    """``(pause before the line, text, is chat)``; the ``[+N]`` pause and the ``C|`` chat marker are removed."""
    pause = 0.0
    match = _PAUSE.match(line)
    if match:
        pause = float(match.group(1))
        line = line[match.end():]
    chat = line.startswith("C|")
    return pause, line[2:] if chat else line, chat


def _seconds(text: str) -> float:
    words = len(text.split())
    return EMPTY_LINE_SECONDS if words == 0 else max(MIN_LINE_SECONDS, words / WORDS_PER_SECOND)


class _Clock:
    """Lays lines out one after another from ``t``; content lines are followed by a working pause."""

    def __init__(self, t: float) -> None:
        self.t = t
        self.n = 0

    def line(self, text: str, pause: float = 0.0, chat: bool = False) -> tuple[float, float]:
        start = self.t + pause
        end = start + _seconds(text)
        self.t = end + (GAP_SECONDS if chat else 1.0 + (self.n * 37 % 5) * 0.6)
        self.n += 1
        return round(start, 2), round(end, 2)


def _caption(lines: list[tuple[float, float, str]]) -> dict[str, list]:
    return {"text": [t for _s, _e, t in lines], "start": [s for s, _e, _t in lines],
            "end": [e for _s, e, _t in lines]}


def marc_raw_captions() -> dict[str, dict[str, list]]:
    out = {}
    for video_id, source in MARC_VIDEOS.items():
        clock = _Clock(0.4)
        lines = []
        for raw in source:
            pause, text, chat = _parse(raw)
            start, end = clock.line(text, pause, chat or not text)
            lines.append((start, end, text))
        out[video_id] = _caption(lines)
    return out


def youcook2() -> tuple[dict[str, dict], dict[str, dict[str, list]]]:
    """``(annotation database, raw captions)`` of the YouCook2-format videos."""
    database: dict[str, dict] = {}
    captions: dict[str, dict[str, list]] = {}
    for video_id, (recipe_type, subset, items) in YOUCOOK2_VIDEOS.items():
        clock = _Clock(0.6)
        lines: list[tuple[float, float, str]] = []
        annotations = []
        for item in items:
            if isinstance(item, str):
                pause, text, chat = _parse(item)
                lines.append((*clock.line(text, pause, chat), text))
                continue
            sentence, content = item
            seg_start = math.ceil(clock.t + SEGMENT_MARGIN)
            clock.t = seg_start + SEGMENT_PAD[0]
            seg_lines = [(*clock.line(text), text) for text in content]
            lines.extend(seg_lines)
            segment = [seg_start, math.ceil(seg_lines[-1][1] + SEGMENT_PAD[1])]
            annotations.append({"segment": segment, "id": len(annotations), "sentence": sentence})
            clock.t = segment[1] + SEGMENT_MARGIN
        duration = round(lines[-1][1] + 6.0, 2)
        database[video_id] = {"duration": duration, "subset": subset, "recipe_type": recipe_type,
                              "video_url": f"https://www.youtube.com/watch?v={video_id}",
                              "annotations": annotations}
        captions[video_id] = _caption(lines)
    return {"database": database}, captions


def _dump(obj: dict, path: Path) -> None:
    """One JSON object, one top-level entry per line (YouCook2: one video per line inside ``database``)."""
    def body(d: dict) -> str:
        return ",\n".join(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in d.items())

    if list(obj) == ["database"]:
        text = '{"database": {\n' + body(obj["database"]) + "\n}}\n"
    else:
        text = "{\n" + body(obj) + "\n}\n"
    path.write_text(text, encoding="utf-8")


def write_all(out_dir: Path = HERE) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    annotations, yc_captions = youcook2()
    files = [(marc_raw_captions(), out_dir / "raw_caption.json"),
             (annotations, out_dir / "youcook2_annotations.json"),
             (yc_captions, out_dir / "youcook2_raw_caption.json")]
    for obj, path in files:
        _dump(obj, path)
    labels = out_dir / "youcook2_label_foodtype.csv"
    labels.write_text("".join(f"{code},{name}\n" for code, name in RECIPE_TYPES.items()), encoding="utf-8")
    return [path for _obj, path in files] + [labels]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help=f"output folder (default {HERE})")
    args = parser.parse_args(argv)
    for path in write_all(args.out):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
