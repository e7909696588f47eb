"""Sentence splitting on the awkward punctuation IMDB reviews have."""

import pytest

from model.sentences import split_sentences


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "I loved this movie.The acting was great!! Mr. Smith played Dr. Jones... "
            'and it was "awesome." Wait... what? 10/10.',
            [
                "I loved this movie.",
                "The acting was great!!",
                'Mr. Smith played Dr. Jones... and it was "awesome."',
                "Wait... what?",
                "10/10.",
            ],
        ),
        (
            "This was bad...really bad. I give it 2/10.He said \"go home!\" and left.",
            ["This was bad...really bad.", "I give it 2/10.", 'He said "go home!" and left.'],
        ),
        (
            "Worst film ever!!!!Avoid it at all costs.\n\nThe U.S.A. version is longer.",
            ["Worst film ever!!!!", "Avoid it at all costs.", "The U.S.A. version is longer."],
        ),
        ("Mr.Smith is great.", ["Mr.Smith is great."]),
        ("no full stop at all", ["no full stop at all"]),
        ("   \n ", []),
    ],
)
def test_splits(text, expected):
    assert [s.text for s in split_sentences(text)] == expected


def test_spans_point_into_the_text():
    text = "  First one.Second one!  Third (really?) one... \n\nFourth"
    spans = split_sentences(text)
    assert [text[s.start : s.end] for s in spans] == [s.text for s in spans]
    assert [s.start for s in spans] == sorted(s.start for s in spans)
    assert len(spans) == 4
