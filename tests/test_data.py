"""The archive loader, splits and movie metadata, on archives the tests build."""

import hashlib
import http.server
import re
import threading
from functools import partial
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.cli import parse_command, parser
from app.offline.pipeline import BuildError, Pipeline
from app.offline.steps.data import ReadData, sentence_rows
from app.settings import Settings
from model.config import IMDB_SHA256, IMDB_URL, Sources, SplitConfig
from model.data import DataError, download, locate_archive, make_splits, read_archive, read_movies, read_sst2
from model.lengths import band_accuracies, band_sizes, length_set
from tests.conftest import write_archive

URL = "http://www.imdb.com/title/{}/usercomments"
ARCHIVE = "aclImdb_v1.tar.gz"


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
    return write_archive(tmp_path / ARCHIVE, tiny_files())


@pytest.fixture
def served_archive(tiny_archive):
    """``tiny_archive`` and its URL on a local HTTP server."""
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(tiny_archive.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield tiny_archive, f"http://127.0.0.1:{server.server_port}/{tiny_archive.name}"
    server.shutdown()
    server.server_close()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_reads_labels_ratings_titles_and_strips_br(tiny_archive):
    reviews = {r.key: r for r in read_archive(tiny_archive)}
    assert len(reviews) == 12  # unsup is skipped
    review = reviews["test/neg/1_2"]
    assert (review.label, review.rating, review.title_id) == ("negative", 2, "tt0000002")
    assert reviews["train/pos/2_9"].title_id == "tt0000001"
    assert "<br" not in review.text
    assert review.text == "A awful film number 1 from test.\n\nReally awful."


def test_review_texts_are_read_as_meant_without_control_characters(real_reviews):
    texts = {r.key: r.text for r in real_reviews}
    assert not [key for key, text in texts.items() if re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text)]
    # Windows-1252 bytes the archive holds as U+0080-U+009F, as their authors meant them
    assert 'part, "Michael" is a disaster – ten minutes of charm' in texts["test/neg/1258_3"]
    assert "The Prey provides neither—and if you think" in texts["test/neg/10024_3"]
    assert 'classics like "The Grinch…" will remain timeless' in texts["test/neg/10044_2"]
    assert "series of the ‘60's" in texts["test/neg/10601_1"]
    assert "at the 1€ discount" in texts["test/pos/4864_8"]
    # 0x8D is undefined in Windows-1252; backspaces and a DLE are dropped; a tab between words is kept
    assert texts["test/neg/4414_1"].endswith('"From Hell it Came" is a compost classic!! :')
    assert texts["train/pos/6745_8"].startswith("A Turkish Bath sequence in a film noir")
    assert "blinded by their own dogma" in texts["train/neg/2133_4"]
    assert "**Possible Spoilers**\tFrom Dreamworks" in texts["test/neg/571_1"]
    # sentences are spans of the cleaned text
    text = texts["test/neg/1258_3"]
    rows = sentence_rows(text)
    assert all(text[row.start : row.end] == row.text for row in rows)
    assert any("disaster – ten minutes of charm" in row.text for row in rows)


@pytest.mark.parametrize(
    "recorded",
    [
        None,  # a run record written before the data version was recorded: version 1
        2,  # sentences split only before a capitalised word: "bad. i hated it." was one sentence
    ],
)
def test_a_database_of_an_earlier_data_version_is_refused(recorded, tiny_archive, tmp_path, capsys):
    from app.cli import main
    from app.db import Run, make_engine, migrate, session_scope

    settings = Settings(imdb=str(tiny_archive), data_dir=tmp_path / "data", train_size=2, eval_size="all")
    engine = make_engine(settings.database)
    migrate(engine)
    config = {k: v for k, v in settings.build_config().items() if k != "data_version"}
    if recorded is not None:
        config["data_version"] = recorded
    with session_scope(engine) as session:
        session.add(Run(config=config, steps={"data": {"seconds": 1}}, counts={}, metrics={}))
    args = ["build", "--imdb", str(tiny_archive), "--data-dir", str(tmp_path / "data"), "--set", "train_size=2"]
    assert main([*args, "--set", "eval_size=all"]) == 1
    assert "was built with other settings (data_version)" in capsys.readouterr().err


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


def test_given_metadata_the_catalogue_takes_titles_with_a_name_and_then_a_plot_first(tiny_archive):
    reviews = read_archive(tiny_archive)
    config = SplitConfig(train_size=2, titles=1, eval_size="all")
    named = {"tt0000002": {"title": "Named", "plot": None}}  # tt0000001 has more reviews but no name
    assert make_splits(reviews, config, named).title_ids == ["tt0000002"]
    both_named = {"tt0000001": {"title": "One", "plot": None}, "tt0000002": {"title": "Two", "plot": None}}
    assert make_splits(reviews, config, both_named).title_ids == ["tt0000001"]  # the most reviews
    with_plot = {**both_named, "tt0000002": {"title": "Two", "plot": "A plot."}}
    assert make_splits(reviews, config, with_plot).title_ids == ["tt0000002"]


def test_the_default_catalogue_of_the_real_archive_has_every_title_named_and_with_a_plot(real_reviews, shared_movies):
    movies = read_movies(shared_movies, {r.title_id for r in real_reviews})
    splits = make_splits(real_reviews, SplitConfig(), movies)
    assert len(splits.title_ids) == 50
    assert all(movies[t]["title"] and movies[t]["plot"] for t in splits.title_ids)
    # without metadata the titles with most short reviews, 9 of them without a name in movies.tsv
    unnamed = [t for t in make_splits(real_reviews, SplitConfig()).title_ids if not movies.get(t, {}).get("title")]
    assert "tt0202382" in unnamed and len(unnamed) == 9


def test_titles_all_takes_every_title_of_the_test_split(tmp_path):
    files = tiny_files()
    files["aclImdb/test/neg/2_2.txt"] = "An awful film. " * 100  # too long for the catalogue: evaluated
    reviews = read_archive(write_archive(tmp_path / ARCHIVE, files))
    splits = make_splits(reviews, SplitConfig(train_size=2, titles="all", max_words=250, eval_size="all"))
    assert sorted(splits.title_ids) == ["tt0000001", "tt0000002"]
    # every short test review (less the one that repeats a training review) is in the catalogue
    short = {r.key for r in reviews if r.split == "test" and r.word_count <= 250}
    assert {r.key for r in splits.catalogue} == short - {"test/pos/1_9"}
    assert [r.key for r in splits.eval] == ["test/neg/2_2"]
    # a bigger number than there are titles takes them all too
    assert make_splits(reviews, SplitConfig(train_size=2, titles=10)).title_ids == splits.title_ids


def test_a_build_whose_catalogue_takes_every_test_review_stops_before_it_starts(tmp_path):
    archive = write_archive(tmp_path / ARCHIVE, tiny_files())
    settings = Settings(imdb=str(archive), data_dir=tmp_path / "data", train_size=2, titles="all", max_words=100000)
    with pytest.raises(BuildError, match="No test review is left for the evaluation set.*--titles all"):
        Pipeline(settings, [ReadData()], progress=False).run()
    assert not (tmp_path / "data" / "textflix.db").exists()  # refused before the database was made


def test_titles_is_a_number_or_all_from_the_flag_and_the_environment(monkeypatch):
    args = vars(parser().parse_args(["build", "--titles", "all"]))
    args.pop("command")
    assert Settings(**args).titles == "all"
    assert Settings(**args).build_config()["titles"] == "all"  # in the run record and the fingerprint
    monkeypatch.setenv("TEXTFLIX_TITLES", "120")
    assert Settings().titles == 120
    for bad in ("some", "0"):
        monkeypatch.setenv("TEXTFLIX_TITLES", bad)
        with pytest.raises(ValidationError, match="whole number or 'all'|greater than or equal to 1"):
            Settings()


def test_splits_are_seeded(tiny_archive):
    reviews = read_archive(tiny_archive)
    keys = [[r.key for r in make_splits(reviews, SplitConfig(train_size=2, seed=s)).train] for s in (3, 3, 4)]
    assert keys[0] == keys[1] != keys[2]  # the same seed, the same split; seed 4 another


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
        locate_archive(Sources(imdb=str(tmp_path / "nowhere.tar.gz")), tmp_path)


def test_download_over_http_once(served_archive, tmp_path):
    archive, url = served_archive
    fetched = locate_archive(Sources(imdb=url), tmp_path / "data")  # another URL: no digest to check
    assert fetched.read_bytes() == archive.read_bytes()
    assert not list((tmp_path / "data").glob("*.part"))
    with pytest.raises(DataError, match="download failed"):
        locate_archive(Sources(imdb=url.replace(archive.name, "missing.tar.gz")), tmp_path / "data")
    archive.unlink()
    assert locate_archive(Sources(imdb=url), tmp_path / "data") == fetched  # no second download


def test_download_with_the_right_digest_is_kept_and_reused(served_archive, tmp_path):
    archive, url = served_archive
    sources = Sources(imdb=url, imdb_sha256=sha256(archive))
    fetched = locate_archive(sources, tmp_path / "data")
    assert fetched.read_bytes() == archive.read_bytes()
    archive.unlink()
    assert locate_archive(sources, tmp_path / "data") == fetched  # checked, and not fetched again


def test_download_with_a_wrong_digest_is_refused_and_deleted(served_archive, tmp_path):
    archive, url = served_archive
    wrong = "0" * 64
    message = f"{url}: the download has SHA-256 {sha256(archive)} where {wrong} was expected; it was deleted."
    with pytest.raises(DataError, match=f"^{re.escape(message)}$"):
        locate_archive(Sources(imdb=url, imdb_sha256=wrong), tmp_path / "data")
    assert not list((tmp_path / "data").iterdir())


def test_download_of_the_wrong_size_is_refused_before_hashing(served_archive, tmp_path):
    archive, url = served_archive
    size = archive.stat().st_size
    with pytest.raises(DataError, match=f"the download has {size:,} bytes where {size + 1:,} were expected"):
        download(url, tmp_path / "data" / ARCHIVE, sha256(archive), size + 1)
    assert not list((tmp_path / "data").iterdir())


def test_truncated_file_at_the_destination_is_downloaded_again(served_archive, tmp_path):
    archive, url = served_archive
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / ARCHIVE).write_bytes(archive.read_bytes()[:100])
    fetched = locate_archive(Sources(imdb=url, imdb_sha256=sha256(archive)), tmp_path / "data")
    assert fetched.read_bytes() == archive.read_bytes()


def test_local_archive_is_read_without_a_digest_unless_one_is_given(tiny_archive, tmp_path):
    assert locate_archive(Sources(imdb=str(tiny_archive)), tmp_path) == tiny_archive
    assert locate_archive(Sources(imdb=str(tiny_archive), imdb_sha256=sha256(tiny_archive)), tmp_path) == tiny_archive
    with pytest.raises(DataError, match=rf"{re.escape(str(tiny_archive))} has SHA-256 \w+ where 0+ was expected"):
        locate_archive(Sources(imdb=str(tiny_archive), imdb_sha256="0" * 64), tmp_path)
    assert tiny_archive.is_file()  # refused, not deleted


def test_the_official_url_is_checked_against_the_official_digest(monkeypatch):
    assert IMDB_URL.startswith("https://")
    assert Sources().expected_sha256 == IMDB_SHA256
    assert Sources(imdb="https://example.org/aclImdb_v1.tar.gz").expected_sha256 is None
    digest = "ab" * 32
    assert Sources(imdb_sha256=f" {digest.upper()} ").expected_sha256 == digest
    with pytest.raises(ValidationError, match="a SHA-256 is 64 hexadecimal digits"):
        Sources(imdb_sha256="abc")
    settings = parse_command(["build", "--set", f"imdb_sha256={digest}"]).settings
    assert settings.group(Sources).expected_sha256 == digest
    monkeypatch.setenv("TEXTFLIX_IMDB_SHA256", digest)
    assert Settings().imdb_sha256 == digest


def test_movies_tsv(shared_movies):
    movies = read_movies(shared_movies, {"tt0069089", "tt0038351", "tt9999999"})
    assert movies["tt0069089"]["title"] == "Pink Flamingos"
    assert movies["tt0069089"]["year"] == 1972
    assert movies["tt0038351"]["title"] is None  # "#DUPE#" in the TSV
    assert movies["tt0038351"]["genres"] is None  # "N/A"
    assert "tt9999999" not in movies


def test_a_movies_tsv_without_its_columns_is_named(tmp_path):
    bad = tmp_path / "movies.tsv"
    bad.write_text("id\tname\ntt1\tx\n")
    with pytest.raises(DataError, match=r"movies.tsv: bad header, missing column\(s\) tconst, title"):
        read_movies(bad, {"tt1"})


def test_sst2_is_read_as_one_line_reviews_and_a_bad_file_is_named(tmp_path):
    good = tmp_path / "dev.tsv"
    good.write_text("sentence\tlabel\nit 's a charming journey . \t1\nunflinchingly bleak \t0\n", encoding="utf-8")
    assert read_sst2(good) == (["it 's a charming journey .", "unflinchingly bleak"], ["positive", "negative"])
    for name, content, problem in (
        ("header.tsv", "words\tlabel\na\t1\n", "bad header"),
        ("label.tsv", "text\tlabel\na\t2\n", "line 2: expected a text and a label of 0 or 1"),
        ("empty.tsv", "text\tlabel\n", "no sentences"),
    ):
        (tmp_path / name).write_text(content, encoding="utf-8")
        with pytest.raises(DataError, match=problem):
            read_sst2(tmp_path / name)
    with pytest.raises(DataError, match="no such file"):
        read_sst2(tmp_path / "missing.tsv")


def test_the_length_table_cuts_each_review_into_its_first_sentences():
    texts = ["One. Two. Three.", "Alone here.", " ".join(f"This is {word}." for word in "a b c d e f g h i".split())]
    cut, labels, bands = length_set(texts, ["positive", "negative", "negative"])
    assert cut[:3] == ["One.", "One. Two.", "One. Two. Three."]
    assert bands[:3] == ["1", "2–3", "2–3"] and cut[3] == "Alone here." and bands[3] == "1"
    assert bands[4:] == ["1", "2–3", "2–3", "4–6", "4–6", "4–6", "7+"] and labels[4:] == ["negative"] * 7
    assert band_sizes(bands) == [3, 4, 3, 1]
    assert band_accuracies(labels, [0.9, 0.9, 0.1, 0.2] + [0.1] * 7, bands) == [1.0, 0.75, 1.0, 1.0]
