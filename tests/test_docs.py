"""The documentation: a README short enough to be a front door, a model README that is a reference,
a scripts README that names every script, a page of the code that names every module, and relative
links that lead to a file and, with an anchor, to one of its headings."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 155  # 150, and the section on bringing your own reviews
MODEL_README_MAX_LINES = 300
PAGES = [ROOT / "README.md", ROOT / "model" / "README.md", ROOT / "scripts" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")  # the target of [text](target) and ![alt](target)
MODULE_OR_FOLDER = re.compile(r"`((?:app|model)/[\w/]*(?:\.py|/))`")
HEADING = re.compile(r"^#+\s+(.*?)\s*$", re.MULTILINE)
CODE_BLOCK = re.compile(r"```.*?```", re.DOTALL)


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings: lower case, punctuation dropped, spaces to
    dashes, a repeated one numbered."""
    found, seen = set(), {}
    for heading in HEADING.findall(CODE_BLOCK.sub("", page.read_text(encoding="utf-8"))):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return found


def relative_targets(page: Path) -> list[str]:
    """The page's links into the repository (no scheme: http:, mailto:), anchors kept; a bare anchor
    is one into the page itself."""
    targets = LINK.findall(CODE_BLOCK.sub("", page.read_text(encoding="utf-8")))
    return [target for target in targets if not re.match(r"[a-z]+:", target)]


def broken(page: Path, target: str) -> bool:
    path, _, anchor = target.partition("#")
    linked = (page.parent / path).resolve() if path else page
    if not linked.exists():
        return True
    return bool(anchor) and linked.suffix == ".md" and anchor not in anchors(linked)


def test_the_readme_is_a_front_door():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= README_MAX_LINES


def test_the_model_readme_is_a_reference_not_a_notebook():
    assert len((ROOT / "model" / "README.md").read_text(encoding="utf-8").splitlines()) <= MODEL_README_MAX_LINES


def test_the_scripts_readme_names_every_script():
    text = (ROOT / "scripts" / "README.md").read_text(encoding="utf-8")
    scripts = sorted(path.name for path in (ROOT / "scripts").iterdir() if path.is_file() and path.name != "README.md")
    assert [name for name in scripts if name not in text] == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_to_a_file_and_heading(page):
    assert [target for target in relative_targets(page) if broken(page, target)] == []


def test_the_code_page_names_every_module_and_no_other():
    """As ``tests/test_layout.py`` keeps the README's short map true, for docs/code.md's long one: a
    folder below ``app/`` or ``model/`` (``app/web/queries/``) names every module in it."""
    named = set(MODULE_OR_FOLDER.findall((ROOT / "docs" / "code.md").read_text(encoding="utf-8")))
    folders = [name for name in named if name.endswith("/") and name.count("/") >= 2]
    modules = sorted(path.relative_to(ROOT).as_posix() for package in ("app", "model") for path in (ROOT / package).rglob("*.py"))
    unnamed = [m for m in modules if m not in named and not m.endswith("__init__.py") and not m.startswith(tuple(folders))]
    assert unnamed == []
    assert [name for name in sorted(named) if not (ROOT / name).exists()] == []
