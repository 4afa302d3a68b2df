"""loading_scripts.ptb: ptb_tokenize (sieve_swap.md §4), hand-written expectations."""

import pytest

from loading_scripts.ptb import ptb_tokenize


@pytest.mark.parametrize(
    "text, expected",
    [
        # the brief's example: lowercase, "." and "!" split, don't -> do n't, the degree sign stays in its token
        ("Preheat the oven to 350°F. Don't burn it!", "preheat the oven to 350°f . do n't burn it !"),
        ("It's the cook's knife, isn't it?", "it 's the cook 's knife , is n't it ?"),
        ("We're done; I'll serve and you'd eat.", "we 're done ; i 'll serve and you 'd eat ."),
        ("I cannot wait, gonna eat", "i can not wait , gon na eat"),
        ("Add 1/2 cup stir-fry sauce: 3.5 oz, 1,000 g at 10:30",
         "add 1/2 cup stir-fry sauce : 3.5 oz , 1,000 g at 10:30"),
        ("Mix well. Bake 20 min. Serve.", "mix well . bake 20 min . serve ."),  # every sentence-final period
        ("Wait... then serve", "wait ... then serve"),
        ("Serve at 10 a.m. tomorrow", "serve at 10 a.m. tomorrow"),  # initialisms keep their periods
        ('Say "stir well" (slowly) -- done', "say `` stir well '' ( slowly ) -- done"),  # PTB quotes, brackets
        ("Don\u2019t stop", "do n't stop"),  # curly apostrophe mapped to '
        ("the cooks' knives", "the cooks ' knives"),
        ("Whisk.", "whisk ."),
        ("", ""),
    ],
)
def test_ptb_tokenize(text, expected):
    assert ptb_tokenize(text) == expected


def test_ptb_tokenize_single_spaces():
    out = ptb_tokenize("  Add   salt ,and   pepper!!  ")
    assert out == "add salt , and pepper ! !"
    assert "  " not in out and out == out.strip()
