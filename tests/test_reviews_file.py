"""model/reviews_file.py: a file of reviews a user brings, each bad file made in the test."""

import json
import tracemalloc

import pytest

from model.data import DataError
from model.names import NEGATIVE, POSITIVE
from model.config import LabelRule
from model.reviews_file import ALL_ITEMS, FIELD_LIMIT, ReviewsFile
from tests.conftest import SHARED_DATA, shared_file

RULE = "scale=1-5,positive=4-5,negative=1-2"


@pytest.fixture(scope="session")
def shared_steam():
    """Steam's game reviews (steam_reviews.csv)."""
    return shared_file(SHARED_DATA / "steam_reviews.csv")


@pytest.fixture(scope="session")
def shared_skytrax():
    """Skytrax's airline lounge reviews (skytrax_lounge.csv)."""
    return shared_file(SHARED_DATA / "skytrax_lounge.csv")


def write(tmp_path, content: str | bytes, name="reviews.csv"):
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8", newline="")
    else:
        path.write_bytes(content)
    return path


def read_all(path, **options) -> tuple[list, ReviewsFile]:
    reviews_file = ReviewsFile(path, **options)
    return list(reviews_file), reviews_file


def add_up(counts) -> bool:
    return counts.read == counts.used + sum(counts.skipped.values())


# -- formats -------------------------------------------------------------------------------------


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_csv_with_quoted_newlines_a_bom_and_any_line_ends(tmp_path, end):
    rows = ["review,voted_up,app_id,app_name", '"Great game.\nWould play again",True,10,Counter-Strike',
            '"Bad, slow, ""broken""",False,20,Team Fortress']  # fmt: skip
    path = write(tmp_path, "\ufeff" + end.join(rows) + end)
    reviews, reviews_file = read_all(path)
    assert reviews_file.columns_chosen == {"text": "review", "label": "voted_up", "item": "app_id", "name": "app_name"}
    assert [(r.key, r.text, r.label, r.item_id, r.item_name) for r in reviews] == [
        ("row 1", "Great game.\nWould play again", POSITIVE, "10", "Counter-Strike"),
        ("row 2", 'Bad, slow, "broken"', NEGATIVE, "20", "Team Fortress"),
    ]
    assert reviews_file.describe() == (
        "reviews.csv: CSV, text=review, label=voted_up (True/False), item=app_id, name=app_name"
    )


@pytest.mark.parametrize("delimiter, name", [("\t", "TSV"), (";", "CSV with semicolons")])
def test_tab_and_semicolon_delimiters_are_sniffed(tmp_path, delimiter, name):
    path = write(tmp_path, f"text{delimiter}label\nfine, really{delimiter}yes\nawful{delimiter}no\n", "r.txt")
    reviews, reviews_file = read_all(path)
    assert [(r.text, r.label) for r in reviews] == [("fine, really", POSITIVE), ("awful", NEGATIVE)]
    assert reviews_file.describe().startswith(f"r.txt: {name}, text=text, label=label (yes/no)")


def test_json_lines_by_suffix_or_by_its_first_byte(tmp_path):
    lines = [{"content": "Loved it", "recommended": True, "asin": "B01"},
             {"content": "Hated it", "recommended": False, "asin": "B02", "extra": [1]},
             {"content": "No verdict", "asin": "B01"}]  # fmt: skip
    body = "\n".join(json.dumps(line) for line in lines) + "\n\n"
    for name in ("r.jsonl", "r.ndjson", "r.txt"):
        reviews, reviews_file = read_all(write(tmp_path, body, name))
        assert reviews_file.format == "JSON Lines"
        assert [(r.text, r.label, r.item_id) for r in reviews] == [
            ("Loved it", POSITIVE, "B01"), ("Hated it", NEGATIVE, "B02"), ("No verdict", None, "B01")
        ]  # fmt: skip
        assert reviews_file.counts.unlabeled == 1


def test_a_json_cell_that_is_not_a_value_is_refused(tmp_path):
    path = write(tmp_path, '{"text": "ok", "label": 1}\n{"text": ["a", "list"], "label": 0}\n', "r.jsonl")
    with pytest.raises(DataError, match=r"r\.jsonl: row 2 \(line 2\): a JSON list"):
        list(ReviewsFile(path))


# -- columns -------------------------------------------------------------------------------------


def test_columns_named_win_and_the_others_are_found(tmp_path):
    path = write(tmp_path, "body,stars,recommended,hotel,title\nnice,5,yes,h1,Nice stay\nbad,1,no,h2,Bad\n")
    assert ReviewsFile(path).columns_chosen == {"text": "body", "label": "recommended", "item": "hotel"}
    assert ReviewsFile(path, columns="name=title").columns_chosen["name"] == "title"
    assert ReviewsFile(path, label_rule=RULE).columns_chosen["label"] == "stars"
    unlabeled = ReviewsFile(path, columns="text=title,label=")
    assert unlabeled.columns_chosen == {"text": "title", "item": "hotel"}
    assert [r.label for r in unlabeled] == [None, None]
    assert "no label column" in unlabeled.describe()


def test_a_file_without_item_column_is_one_item(tmp_path):
    reviews, reviews_file = read_all(write(tmp_path, "text\nfirst\nsecond\n"))
    assert {r.item_id for r in reviews} == {ALL_ITEMS} and {r.item_name for r in reviews} == {None}
    assert reviews_file.describe() == (
        'reviews.csv: CSV, text=text, no label column (every row unlabeled), no item column (one item "all")'
    )


@pytest.mark.parametrize(
    "columns, message",
    [("text=review,label=verdict", r'no column "verdict" \(named for label\); the file has: review, rating, shop'),
     ("text=review,grade=rating", r'"grade=rating" is not ROLE=COLUMN with a role among text, label, item, name'),
     ("text=review,text=shop", "each once"),
     ("text=", "the text column cannot be left out"),
     ("text=review,label=review", 'column "review" is chosen for more than one role'),
     ("text=review,name=shop", "needs an item column too")],
)  # fmt: skip
def test_columns_that_do_not_fit_the_file_are_refused(tmp_path, columns, message):
    path = write(tmp_path, "review,rating,shop\ngood,5,a\n")
    with pytest.raises(DataError, match=message):
        ReviewsFile(path, columns=columns)


def test_no_text_column_names_the_columns_the_file_has(tmp_path):
    with pytest.raises(DataError, match=r"reviews\.csv: no text column among opinion, grade"):
        ReviewsFile(write(tmp_path, "opinion,grade\ngood,1\n"))


# -- labels --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "yes, no",
    [("True", "False"), ("1", "0"), ("YES", "no"), ("y", "N"), ("pos", "neg"), ("Positive", "NEGATIVE"),
     ("Recommended", "Not  Recommended"), ("thumbs up", "Thumbs Down"), ("1.0", "0.0")],
)  # fmt: skip
def test_yes_no_labels_as_users_write_them(tmp_path, yes, no):
    reviews, reviews_file = read_all(write(tmp_path, f"text,label\nliked it,{yes}\nhated it,{no}\nunsure,\n"))
    assert [r.label for r in reviews] == [POSITIVE, NEGATIVE, None]
    assert reviews_file.counts.per_label() == {NEGATIVE: 1, POSITIVE: 1} and reviews_file.counts.unlabeled == 1


def test_a_rating_without_a_rule_is_refused_with_the_columns_values(tmp_path):
    rows = [f"review {i},{i % 5 + 1}" for i in range(300)] + ["late,7"]
    path = write(tmp_path, "text,rating\n" + "\n".join(rows) + "\n")
    with pytest.raises(DataError) as refused:
        ReviewsFile(path)
    message = str(refused.value)
    assert "row 2 (line 3): the label column \"rating\" holds '2', a rating rather than a yes/no label" in message
    assert "scale=1-5,positive=4-5,negative=1-2" in message
    assert "  1      60\n" in message and "  7      1" in message  # the whole file's counts, not the first rows'


def test_unknown_words_late_in_the_file_stop_the_read_with_a_table_of_top_values(tmp_path):
    rows = [f"review {i},yes" for i in range(250)] + [f"review x{i},maybe {i}" for i in range(25)]
    path = write(tmp_path, "text,label\n" + "\n".join(rows) + "\n")
    reviews_file = ReviewsFile(path)  # the first rows are fine
    with pytest.raises(DataError) as refused:
        list(reviews_file)
    message = str(refused.value)
    assert "row 251 (line 252): the label column \"label\" holds 'maybe 0', not a label this reader knows" in message
    assert "  yes       250\n" in message and message.endswith("... 6 more values (6 rows)")
    assert message.count("\n  maybe") == 19


def test_a_rule_maps_ratings_and_leaves_the_middle_unlabeled(tmp_path):
    path = write(tmp_path, "text,overall_rating\na,5\nb,4.5\nc,3\nd,1.0\ne,\n")
    reviews, reviews_file = read_all(path, label_rule=RULE)
    ratings = [(POSITIVE, 5), (POSITIVE, 4.5), (None, 3), (NEGATIVE, 1), (None, None)]
    assert [(r.label, r.rating) for r in reviews] == ratings
    counts = reviews_file.counts
    assert (counts.per_label(), counts.unlabeled, counts.between) == ({NEGATIVE: 1, POSITIVE: 2}, 2, 1)
    assert reviews_file.describe() == (
        "reviews.csv: CSV, text=text, label=overall_rating (ratings: scale=1-5,positive=4-5,negative=1-2), "
        'no item column (one item "all")'
    )


@pytest.mark.parametrize("value, why", [("9", "outside the label rule's scale"), ("great", "not a number")])
def test_a_rule_refuses_what_is_off_its_scale(tmp_path, value, why):
    path = write(tmp_path, f"text,stars\na,5\nb,{value}\n")
    with pytest.raises(DataError, match=rf"row 2 \(line 3\): the label column \"stars\" holds '{value}', {why}"):
        ReviewsFile(path, label_rule=RULE)


@pytest.mark.parametrize(
    "rule, message",
    [("scale=1-5,positive=4-5", "no negative="), ("scale=1-5,positive=4-5,negative=2-1", "runs backwards"),
     ("scale=1-5,positive=3-5,negative=1-3", "overlap"), ("scale=1-5,positive=4-6,negative=1-2", "within the scale"),
     ("scale=1-5,good=4-5,negative=1-2", '"good=4-5" is not scale=')],
)  # fmt: skip
def test_a_rule_that_does_not_hold_is_refused(rule, message):
    with pytest.raises(ValueError, match=message):
        LabelRule.parse(rule)


def test_a_rule_reads_back_as_written():
    rule = "scale=0-10,positive=7-10,negative=0-4.5"
    assert str(LabelRule.parse(rule.replace(",", ", "))) == rule
    assert LabelRule.parse("scale=-1-1,positive=1-1,negative=-1--1").label(-1) == NEGATIVE


# -- what is used and what is skipped --------------------------------------------------------------


def test_counts_add_up_with_every_skip_reason_and_repairs(tmp_path):
    lines = ["text,label,item_id", "didnâ€™t like it,no,a", "Good <br /><br />game,yes,a", '"   ",yes,a',
             "Good <br /><br />game,yes,b", f"{'x' * 101},no,a", "no item,yes,", "fine &amp; dandy,yes,b",
             "“curly” stays,yes,b"]  # fmt: skip
    reviews, reviews_file = read_all(write(tmp_path, "\n".join(lines) + "\n"), max_chars=100)
    assert [(r.key, r.text) for r in reviews] == [
        ("row 1", "didn’t like it"), ("row 2", "Good\n\ngame"), ("row 7", "fine & dandy"), ("row 8", "“curly” stays")
    ]  # fmt: skip
    counts = reviews_file.counts
    assert dict(counts.skipped) == {"empty text": 1, "duplicate": 1, "too long": 1, "empty item": 1}
    assert (counts.read, counts.used, counts.repaired) == (8, 4, 2) and add_up(counts)
    assert str(counts) == (
        "8 rows read, 4 used (1 negative, 3 positive, 0 unlabeled; 2 repaired), "
        "skipped: 1 empty text, 1 duplicate, 1 too long, 1 empty item"
    )


def test_each_pass_rereads_the_file_and_counts_exist_only_after_one(tmp_path):
    reviews_file = ReviewsFile(write(tmp_path, "text\nsame\nsame\nother\n"))
    with pytest.raises(RuntimeError, match="no complete pass"):
        _ = reviews_file.counts
    assert [r.text for r in reviews_file] == [r.text for r in reviews_file] == ["same", "other"]
    assert reviews_file.counts.skipped["duplicate"] == 1


def test_a_row_with_broken_bytes_is_skipped_when_the_file_is_mostly_fine(tmp_path):
    rows = [f"review number {i},yes".encode() for i in range(200)]
    rows[150] = b"caf\xe9 au lait,yes"
    reviews, reviews_file = read_all(write(tmp_path, b"text,label\n" + b"\n".join(rows) + b"\n"))
    assert len(reviews) == 199 and "row 151" not in {r.key for r in reviews}
    assert reviews_file.counts.skipped == {"broken encoding": 1} and add_up(reviews_file.counts)


def test_a_file_not_in_utf8_is_refused(tmp_path):
    with pytest.raises(DataError, match=r"1 of 1 rows hold bytes that are not UTF-8 \(the first: row 1\)"):
        ReviewsFile(write(tmp_path, "text,label\ncaf\u00e9,yes\n".encode("latin-1")))
    # Its first bytes ASCII: the rows with other bytes are too many to be a few broken ones.
    rows = [f"review {i},yes" for i in range(5000)] + [f"cr\u00e8me {i},no" for i in range(100)]
    path = write(tmp_path, ("text,label\n" + "\n".join(rows) + "\n").encode("cp1252"))
    with pytest.raises(DataError, match=r"100 of 5,100 rows hold bytes that are not UTF-8 \(the first: row 5001\)"):
        list(ReviewsFile(path))


# -- files that are not files of reviews -----------------------------------------------------------


@pytest.mark.parametrize(
    "content, message",
    [(b"", "an empty file"), (b"\xef\xbb\xbf \n\n", "an empty file"), (b"text,label\n", "a header and no rows"),
     (b"text,label\r\n\r\n", "a header and no rows"), (b"PK\x03\x04\x14\x00", "a compressed file"),
     (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", r"a binary file, not text \(a NUL byte at byte 8\)"),
     ("text\nhi\n".encode("utf-16"), "UTF-16 text; save it as UTF-8"),
     (b'[{"text": "hi"}]', "a JSON array; give JSON Lines instead"),
     (b"text,label\ngood,yes\nbad,no,extra\n", r"row 2 \(line 3\): 3 fields where the header has 2"),
     (b'{"text": "hi"}\n{"text": "oops"\n', r"row 2 \(line 2\): not JSON")],
)  # fmt: skip
def test_files_that_cannot_be_read_say_why(tmp_path, content, message):
    with pytest.raises(DataError, match=message):
        list(ReviewsFile(write(tmp_path, content, "r.jsonl" if content.startswith(b"{") else "r.csv")))


def test_a_nul_byte_past_the_files_start_is_refused_with_its_row(tmp_path):
    rows = [f"review {i}" for i in range(10_000)] + ["bad\x00row"]
    with pytest.raises(DataError, match=r"r\.csv: row 10001 \(line 10002\): a NUL byte; not a text file"):
        list(ReviewsFile(write(tmp_path, "text\n" + "\n".join(rows) + "\n", "r.csv")))


@pytest.mark.parametrize("field", ["x" * 5_000_000, '"' + "line\n" * 1_000_000 + '"'], ids=["one line", "many lines"])
def test_megabytes_in_one_field_refuse_the_row_without_reading_them_in(tmp_path, field):
    path = write(tmp_path, f"text,label\nfine,yes\n{field},no\nafter,yes\n")
    tracemalloc.start()
    with pytest.raises(DataError, match=rf"row 2 \(line 3\): a (line|field) over {FIELD_LIMIT:,} characters"):
        list(ReviewsFile(path))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2_000_000


def test_a_pass_streams_in_bounded_memory(tmp_path):
    line = '"A long enough review of a game that goes on for a while, with some words and 10/10",True\n'
    path = write(tmp_path, "review,voted_up\n" + line * 40_000)  # 3.6 MB, one text
    reviews_file = ReviewsFile(path)
    tracemalloc.start()
    used = sum(1 for _ in reviews_file)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert used == 1 and reviews_file.counts.skipped["duplicate"] == 39_999
    assert peak < 500_000


# -- the real corpora ----------------------------------------------------------------------------


@pytest.mark.shared_data
def test_steam_reviews_are_found_and_read_whole(shared_steam):
    reviews, reviews_file = read_all(shared_steam)
    assert reviews_file.describe() == (
        "steam_reviews.csv: CSV, text=review, label=voted_up (True/False), item=app_id, name=app_name"
    )
    counts = reviews_file.counts
    assert counts.read == 22_044 and add_up(counts) and counts.unlabeled == 0
    assert counts.per_label() == {NEGATIVE: 5_789, POSITIVE: 15_064}
    assert dict(counts.skipped) == {"duplicate": 1_191} and counts.repaired == 18
    assert len({r.item_id for r in reviews}) == 101 and reviews[0].item_name == "Counter-Strike"


@pytest.mark.shared_data
def test_skytrax_reads_its_recommendation_and_refuses_its_mixed_ratings(shared_skytrax):
    reviews, reviews_file = read_all(shared_skytrax, columns="text=content,label=recommended,item=airline_name")
    assert reviews_file.describe() == (
        "skytrax_lounge.csv: CSV, text=content, label=recommended (1/0), item=airline_name"
    )
    counts = reviews_file.counts
    assert (counts.read, counts.used, dict(counts.skipped)) == (2_264, 2_261, {"duplicate": 3})
    assert counts.per_label() == {NEGATIVE: 1_445, POSITIVE: 816} and len({r.item_id for r in reviews}) == 97
    assert ReviewsFile(shared_skytrax).columns_chosen == reviews_file.columns_chosen
    with pytest.raises(DataError, match=r"(?s)\"overall_rating\" holds '3.0', a rating.*  9\.0      20\n"):
        ReviewsFile(shared_skytrax, columns="label=overall_rating")
    outside = r"(?s)row 32 \(line 33\).*'9.0', outside the label rule's scale.*  \(empty\)  5"
    with pytest.raises(DataError, match=outside):
        list(ReviewsFile(shared_skytrax, label_rule=RULE))
