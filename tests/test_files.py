"""``model.files.atomic_write``: a file takes its name only once it is written whole."""

import gzip
import json

import pytest

from model.files import atomic_write


def test_the_new_file_replaces_the_old_whole_and_no_temporary_file_is_left(tmp_path):
    path = tmp_path / "facts.json"
    path.write_text("old")
    with atomic_write(path, "w", encoding="utf-8") as file:
        file.write("new, ")
        assert path.read_text() == "old"  # not yet renamed
        file.write("whole")
    assert path.read_text() == "new, whole"
    assert [p.name for p in tmp_path.iterdir()] == ["facts.json"]


def test_a_failure_mid_write_leaves_the_old_file_intact_and_no_temporary_file(tmp_path):
    path = tmp_path / "splits.json.gz"
    path.write_bytes(gzip.compress(b'{"old": true}'))
    with (
        pytest.raises(TypeError, match="not JSON serializable"),
        atomic_write(path, "wb") as raw,
        gzip.open(raw, "wt", encoding="utf-8") as file,
    ):
        json.dump({"rows": list(range(10_000)), "bad": object()}, file)  # fails after writing the rows
    assert json.loads(gzip.decompress(path.read_bytes())) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["splits.json.gz"]


def test_a_failure_with_no_old_file_leaves_nothing(tmp_path):
    path = tmp_path / "export.csv"
    with pytest.raises(TypeError), atomic_write(path, "w") as file:
        file.write(b"bytes into a text file")
    assert list(tmp_path.iterdir()) == []


def test_the_file_has_the_permissions_of_any_new_file(tmp_path):
    plain = tmp_path / "plain"
    plain.write_bytes(b"")
    path = tmp_path / "written"
    with atomic_write(path, "wb") as file:
        file.write(b"x")
    assert path.stat().st_mode == plain.stat().st_mode
