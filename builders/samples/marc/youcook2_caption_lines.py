"""The hand-written YouCook2-format videos of the MARC sample (the chat/content classifier's training set), read by
``make_captions.py``, which writes ``youcook2_annotations.json``, ``youcook2_raw_caption.json`` and
``youcook2_label_foodtype.csv`` from them.

Every line was written by hand for this project (CC0-1.0); none comes from YouTube or YouCook2.
"""

from __future__ import annotations

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
