"""The archive loader, splits and movie metadata, on archives the tests build."""

import http.server
import threading
from functools import partial
from pathlib import Path

import pytest

from model.config import SplitConfig
from model.data import DataError, locate_archive, make_splits, read_archive, read_movies
from tests.conftest import SHARED_MOVIES, write_archive

URL = "http://www.imdb.com/title/{}/usercomments"


def tiny_files() -> dict[str, str]:
    """Three reviews per labelled folder; test/pos/1 repeats train/pos/0 word for word."""
    files = {}
    for split in ("train", "test"):
        for polarity, word in (("pos", "great"), ("neg", "awful")):
            titles = ["tt0000001", "tt0000002", "tt0000001"]
            files[f"aclImdb/{split}/urls_{polarity}.txt"] = "\n".join(URL.format(t) for t in titles) + "\n"
            for i in range(3):
                rating = 9 if polarity == "pos" else 2
                text = f"A {word} film number {i} from {split}.<br /><br />Really {word}."
                files[f"aclImdb/{split}/{polarity}/{i}_{rating}.txt"] = text
    files["aclImdb/test/pos/1_9.txt"] = files["aclImdb/train/pos/0_9.txt"]
    files["aclImdb/train/unsup/0_0.txt"] = "unlabelled, never used"
    files["aclImdb/README"] = "readme"
    return files


@pytest.fixture
def tiny_archive(tmp_path) -> Path:
    return write_archive(tmp_path / "aclImdb_v1.tar.gz", tiny_files())


def test_reads_labels_ratings_titles_and_strips_br(tiny_archive):
    reviews = {r.key: r for r in read_archive(tiny_archive)}
    assert len(reviews) == 12  # unsup is skipped
    review = reviews["test/neg/1_2"]
    assert (review.label, review.rating, review.title_id) == ("negative", 2, "tt0000002")
    assert reviews["train/pos/2_9"].title_id == "tt0000001"
    assert "<br" not in review.text
    assert review.text == "A awful film number 1 from test.\n\nReally awful."


def test_duplicates_never_cross_from_training_into_test(tiny_archive):
    reviews = read_archive(tiny_archive)
    splits = make_splits(reviews, SplitConfig(train_size=6, titles=2, max_words=250, eval_size="all", seed=1))
    assert splits.dropped_duplicates == 1
    train_texts = {r.text for r in splits.train}
    assert not train_texts & {r.text for r in splits.catalogue + splits.eval}
    assert [r.label for r in splits.train].count("positive") == 3


def test_catalogue_takes_titles_with_most_short_reviews(tiny_archive):
    splits = make_splits(read_archive(tiny_archive), SplitConfig(train_size=2, titles=1, eval_size="all"))
    # tt0000001 has two test reviews per folder (one dropped as a duplicate), tt0000002 one.
    assert splits.title_ids == ["tt0000001"]
    assert {r.title_id for r in splits.catalogue} == {"tt0000001"}
    assert {r.key for r in splits.eval} == {"test/pos/1_9", "test/neg/1_2"} - {"test/pos/1_9"}


def test_splits_are_seeded(tiny_archive):
    reviews = read_archive(tiny_archive)
    keys = [[r.key for r in make_splits(reviews, SplitConfig(train_size=2, seed=s)).train] for s in (3, 3, 4)]
    assert keys[0] == keys[1]


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda blob: blob[: len(blob) // 2], "truncated or corrupt"),
        (lambda blob: b"not a tarball at all" * 10, "truncated or corrupt"),
    ],
)
def test_damaged_archive_is_named_in_one_sentence(tiny_archive, damage, message):
    tiny_archive.write_bytes(damage(tiny_archive.read_bytes()))
    with pytest.raises(DataError, match=message) as error:
        read_archive(tiny_archive)
    assert str(tiny_archive) in str(error.value)


def test_wrong_archive_and_missing_urls(tmp_path):
    wrong = write_archive(tmp_path / "other.tar.gz", {"photos/cat.txt": "meow"})
    with pytest.raises(DataError, match=r"no reviews in aclImdb/train/pos/, not the IMDB archive"):
        read_archive(wrong)
    files = tiny_files()
    del files["aclImdb/test/urls_neg.txt"]
    with pytest.raises(DataError, match=r"aclImdb/test/urls_neg.txt is missing"):
        read_archive(write_archive(tmp_path / "no-urls.tar.gz", files))


def test_missing_archive_file(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        locate_archive(str(tmp_path / "nowhere.tar.gz"), tmp_path)


def test_download_over_http_once(tiny_archive, tmp_path):
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(tiny_archive.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/{tiny_archive.name}"
        fetched = locate_archive(url, tmp_path / "data")
        assert fetched.read_bytes() == tiny_archive.read_bytes()
        assert not list((tmp_path / "data").glob("*.part"))
        with pytest.raises(DataError, match="download failed"):
            locate_archive(url.replace(tiny_archive.name, "missing.tar.gz"), tmp_path / "data")
        tiny_archive.unlink()
        assert locate_archive(url, tmp_path / "data") == fetched  # no second download
    finally:
        server.server_close()


def test_movies_tsv(tmp_path):
    if SHARED_MOVIES.is_file():
        movies = read_movies(SHARED_MOVIES, {"tt0069089", "tt0038351", "tt9999999"})
        assert movies["tt0069089"]["title"] == "Pink Flamingos"
        assert movies["tt0069089"]["year"] == 1972
        assert movies["tt0038351"]["title"] is None  # "#DUPE#" in the TSV
        assert movies["tt0038351"]["genres"] is None  # "N/A"
        assert "tt9999999" not in movies
    bad = tmp_path / "movies.tsv"
    bad.write_text("id\tname\ntt1\tx\n")
    with pytest.raises(DataError, match=r"movies.tsv: bad header, missing column\(s\) tconst, title"):
        read_movies(bad, {"tt1"})
