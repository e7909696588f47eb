"""The layout of the code: which package may import which, no import cycle, a module map in
README.md that names every module, and scripts that import the package as installed."""

import ast
import os
import re
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "model")
OFFLINE, WEB = "app.offline", "app.web"
MAP_HEADING = "How the code is laid out"
SCRIPTS = sorted((ROOT / "scripts").rglob("*.py"))  # scripts/studies/ too
STUDIES = sorted((ROOT / "scripts" / "studies").glob("*.py"))
# The one module of the web server a study may read: what the server charges a request (the splitter's
# study prices the texts it finds costly).
WEB_PRICES = "app.web.costs"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def imported(module: str, path: Path) -> set[str]:
    """The modules of ``PACKAGES`` that ``module`` imports anywhere in it (inside functions too):
    for ``from a.b import c``, the module ``a.b.c`` where there is one, else ``a.b``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names)
    return {name for name in names if name.split(".")[0] in PACKAGES}


GRAPH = {module: imported(module, path) for module, path in MODULES.items()}


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def arrows(source: str, target: str) -> list[str]:
    return [f"{m} -> {t}" for m, targets in GRAPH.items() if within(m, source) for t in targets if within(t, target)]


def test_every_import_of_the_packages_names_a_module_of_theirs():
    unknown = [f"{m} -> {t}" for m, targets in GRAPH.items() for t in targets if t not in MODULES]
    assert not unknown


def test_the_installed_packages_are_every_package_of_the_tree():
    """A package folder left out of pyproject.toml's list imports from a checkout (and an editable
    install) but is missing from a wheel or a plain ``pip install .``."""
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    folders = {module for module, path in MODULES.items() if path.name == "__init__.py"}
    assert sorted(listed) == sorted(folders)


def test_model_imports_nothing_of_app():
    assert not arrows("model", "app")


def test_the_build_and_the_web_server_do_not_import_each_other():
    assert not arrows(OFFLINE, WEB)
    assert not arrows(WEB, OFFLINE)


def test_the_pages_and_the_json_api_do_not_import_each_other():
    assert not arrows("app.web.pages", "app.web.api")
    assert not arrows("app.web.api", "app.web.pages")


def test_the_core_imports_neither_the_build_nor_the_web_server_but_the_command_line_does():
    core = [m for m in MODULES if within(m, "app") and not within(m, OFFLINE) and not within(m, WEB) and m != "app.cli"]
    assert [f"{m} -> {t}" for m in core for t in GRAPH[m] if within(t, OFFLINE) or within(t, WEB)] == []


def test_no_import_cycle():
    """Depth-first search over the graph; a module met again while still on the path closes a cycle."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            pytest.fail("import cycle: " + " -> ".join(path[path.index(module) :] + [module]))
        if module in done:
            return
        for target in sorted(GRAPH[module]):
            visit(target, path + [module])
        done.add(module)

    for module in MODULES:
        visit(module, [])


def module_map() -> str:
    """The section of README.md under the heading ``MAP_HEADING``, wherever it stands."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    heading = re.compile(r"^(#+)\s+(.*?)\s*$")
    for index, line in enumerate(lines):
        match = heading.match(line)
        if match and match.group(2).casefold() == MAP_HEADING.casefold():
            level, section = len(match.group(1)), []
            for rest in lines[index + 1 :]:
                other = heading.match(rest)
                if other and len(other.group(1)) <= level:
                    break
                section.append(rest)
            return "\n".join(section)
    pytest.fail(f"README.md has no heading {MAP_HEADING!r}")


def listed_paths() -> set[str]:
    """The files and folders of ``PACKAGES`` that the module map names in backquotes."""
    return set(re.findall(rf"`((?:{'|'.join(PACKAGES)})/[\w/]*(?:\.py|/))`", module_map()))


def test_every_module_the_map_names_exists():
    assert [path for path in sorted(listed_paths()) if not (ROOT / path).exists()] == []


def test_the_map_names_every_module():
    listed = listed_paths()
    unlisted = []
    for path in MODULES.values():
        relative = path.relative_to(ROOT).as_posix()
        folders = {"/".join(relative.split("/")[:depth]) + "/" for depth in range(2, relative.count("/") + 1)}
        if path.name != "__init__.py" and relative not in listed and not folders & listed:
            unlisted.append(relative)
    assert unlisted == []


def test_scripts_import_the_package_as_installed():
    assert [script.name for script in SCRIPTS if "sys.path" in script.read_text(encoding="utf-8")] == []


def taken_names(path: Path) -> list[tuple[str, str]]:
    """(module, name) for each name a script takes from a module of ``PACKAGES``: ``from module import
    name``, and ``module.name`` where the script imported ``module`` itself."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound, taken = {}, []  # bound: a name of the script → the module it is
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:  # "import a.b" binds a, "import a.b as c" binds c to a.b
                top = alias.name.split(".")[0]
                bound[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PACKAGES:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in MODULES:
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                else:
                    taken.append((node.module, alias.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            parts, base = [node.attr], node.value
            while isinstance(base, ast.Attribute):
                parts, base = [base.attr, *parts], base.value
            if isinstance(base, ast.Name) and base.id in bound:
                *module, name = [bound[base.id], *parts]
                if ".".join(module) in MODULES and f"{'.'.join(module)}.{name}" not in MODULES:
                    taken.append((".".join(module), name))
    return taken


def declared(module: str) -> list[str] | None:
    """The module's ``__all__``, or None where it has none."""
    for node in ast.parse(MODULES[module].read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return ast.literal_eval(node.value)
    return None


def may_take(study: Path, module: str, name: str) -> bool:
    """A study reaches the build (``app.offline``) and the models (``model``) through the names their
    modules list in ``__all__``, the rest of the application through its public names, and of the web
    server only what it charges a request (``WEB_PRICES``)."""
    if within(module, WEB):
        return module == WEB_PRICES and not name.startswith("_")
    if within(module, OFFLINE) or within(module, "model"):
        return name in (declared(module) or [])
    return not name.startswith("_")


def test_studies_take_from_the_build_and_the_models_only_what_they_declare_for_outside_use():
    taken = [(study, module, name) for study in STUDIES for module, name in taken_names(study)]
    wrong = [f"{study.name}: {module}.{name}" for study, module, name in taken if not may_take(study, module, name)]
    assert wrong == []


def imported_modules(path: Path) -> set[str]:
    """Every module a script imports, by the name it imports it by."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module or "")
    return found


def test_no_study_imports_another_script():
    """What studies share is a public function of the build or the models, not another script's."""
    scripts = {script.stem for script in SCRIPTS} | {"scripts"}
    imports = [(study, module) for study in STUDIES for module in sorted(imported_modules(study))]
    assert [f"{study.name}: {module}" for study, module in imports if module.split(".")[0] in scripts] == []


@pytest.fixture(scope="module")
def help_answers() -> dict[Path, subprocess.CompletedProcess]:
    """Each script's ``--help``, run from the repository root, as many at once as there are cores: most
    of a script's seconds are its imports (torch, transformers), one core each."""

    def answer(script: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(script.relative_to(ROOT)), "--help"], cwd=ROOT, capture_output=True, text=True, timeout=300
        )

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return dict(zip(SCRIPTS, pool.map(answer, SCRIPTS)))


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda script: script.relative_to(ROOT / "scripts").as_posix())
def test_each_script_answers_help_from_the_repository_root(script, help_answers):
    result = help_answers[script]
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout
