"""The documentation: a README short enough to be a front door, a scripts README that names every
script, a page of the code that names every module, and relative links that lead to a file."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 150
PAGES = [ROOT / "README.md", ROOT / "scripts" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")  # the target of [text](target) and ![alt](target)
MODULE_OR_FOLDER = re.compile(r"`((?:app|model)/[\w/]*(?:\.py|/))`")


def relative_targets(page: Path) -> list[str]:
    """The page's links that name a file of the repository: no scheme (http:, mailto:), no bare anchor."""
    targets = (target.split("#")[0] for target in LINK.findall(page.read_text(encoding="utf-8")))
    return [target for target in targets if target and not re.match(r"[a-z]+:", target)]


def test_the_readme_is_a_front_door():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= README_MAX_LINES


def test_the_scripts_readme_names_every_script():
    text = (ROOT / "scripts" / "README.md").read_text(encoding="utf-8")
    scripts = sorted(path.name for path in (ROOT / "scripts").iterdir() if path.is_file() and path.name != "README.md")
    assert [name for name in scripts if name not in text] == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_to_a_file(page):
    assert [target for target in relative_targets(page) if not (page.parent / target).exists()] == []


def test_the_code_page_names_every_module_and_no_other():
    """As ``tests/test_layout.py`` keeps the README's short map true, for docs/code.md's long one: a
    folder below ``app/`` or ``model/`` (``app/web/queries/``) names every module in it."""
    named = set(MODULE_OR_FOLDER.findall((ROOT / "docs" / "code.md").read_text(encoding="utf-8")))
    folders = [name for name in named if name.endswith("/") and name.count("/") >= 2]
    modules = sorted(path.relative_to(ROOT).as_posix() for package in ("app", "model") for path in (ROOT / package).rglob("*.py"))
    unnamed = [m for m in modules if m not in named and not m.endswith("__init__.py") and not m.startswith(tuple(folders))]
    assert unnamed == []
    assert [name for name in sorted(named) if not (ROOT / name).exists()] == []
