"""The book's shape: every file of `tinyattn/` says its chapter in the first words of its docstring
("Chapter 2. Where a token is: ..."), and imports backwards only: a file of chapter 1 uses nothing
of chapters 2 to 5, nor of the toolkit; a file of chapter 2 nothing of chapters 3 to 5, and so on;
so a reader can stop at the end of any chapter with nothing missing. Checked on every import and
on every name a file takes from a package's index (`F.gelu` through `import tinyattn.functional as
F`), resolved to the module that defines it. The toolkit (`tinyattn_tools`) imports the book; the
book imports nothing of it but in its two entry points."""
import ast
import importlib
import importlib.util
import pathlib
import re

import pytest

import tinyattn

PACKAGE = pathlib.Path(tinyattn.__file__).parent
# The indexes gather every chapter's names for `import tinyattn as ta`, `tinyattn.functional as F`
# and `tinyattn.nn as nn`; they belong to no chapter.
INDEXES = {"tinyattn", "tinyattn.functional", "tinyattn.nn"}
# The toolkit's two entry points in the book's folder: `import tinyattn.viz` and `python -m tinyattn`.
ENTRY_POINTS = {"tinyattn.viz", "tinyattn.__main__"}
TOOLKIT = 99          # the toolkit comes after every chapter
CHAPTER_LINE = re.compile(r"Chapter (\d)\. [A-Z`\"]")


def module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def path_of(name):
    path = PACKAGE.parent / (name.replace(".", "/") + ".py")
    return path if path.exists() else PACKAGE.parent / name.replace(".", "/") / "__init__.py"


def declared_chapter(name):
    """The chapter a book module's docstring names in its first words; None if it names none."""
    docstring = ast.get_docstring(ast.parse(path_of(name).read_text())) or ""
    match = CHAPTER_LINE.match(docstring)
    return int(match.group(1)) if match else None


def chapter(name):
    if name.startswith("tinyattn_tools") or name in ENTRY_POINTS:
        return TOOLKIT
    return declared_chapter(name)


def used_modules(path):
    """The tinyattn modules a file uses: those it imports, and for each index it imports, the
    modules defining the names it takes from it."""
    tree = ast.parse(path.read_text())
    used, aliases = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tinyattn"):
                    used.add(alias.name)
                    aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tinyattn"):
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if importlib.util.find_spec(node.module) and is_module(submodule):
                    used.add(submodule)
                    aliases[alias.asname or alias.name] = submodule
                else:
                    used.add(defining_module(node.module, alias.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and aliases.get(node.value.id) in INDEXES | {"tinyattn.ops"}:
            used.add(defining_module(aliases[node.value.id], node.attr))
    return {name for name in used if name not in INDEXES}


def is_module(name):
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def defining_module(module, name):
    value = getattr(importlib.import_module(module), name)
    return getattr(value, "__module__", module) if callable(value) else module


FILES = sorted(path for path in PACKAGE.rglob("*.py") if module_name(path) not in INDEXES)
BOOK = [path for path in FILES if module_name(path) not in ENTRY_POINTS]


@pytest.mark.parametrize("path", BOOK, ids=lambda path: module_name(path))
def test_a_file_says_its_chapter_first(path):
    assert declared_chapter(module_name(path)) in range(1, 7), \
        f"{module_name(path)}: its docstring must begin 'Chapter N. ...'"


@pytest.mark.parametrize("path", FILES, ids=lambda path: module_name(path))
def test_a_file_uses_nothing_of_a_later_chapter(path):
    importer = module_name(path)
    later = {name: chapter(name) for name in used_modules(path)
             if chapter(name) > chapter(importer)}
    assert later == {}, f"{importer} (chapter {chapter(importer)}) uses {later}"


def test_the_book_imports_the_toolkit_only_in_its_entry_points():
    for path in BOOK:
        assert not any(name.startswith("tinyattn_tools") for name in used_modules(path)), path


def test_the_chapter_1_checks_use_chapter_1_alone():
    """Each package's checks.py holds the doors' rules of its chapter-1 files; a later chapter's
    rules are beside their file (`nn/lora_checks.py` beside `nn/lora.py`), in its chapter."""
    for name in ("ops.checks", "functional.checks", "nn.checks"):
        assert declared_chapter(f"tinyattn.{name}") == 1
        assert all(chapter(used) == 1 for used in used_modules(path_of(f"tinyattn.{name}"))), name


def test_a_files_checks_are_in_its_chapter():
    for path in BOOK:
        name = module_name(path)
        if name.endswith("_checks"):
            assert declared_chapter(name) == declared_chapter(name.removesuffix("_checks")), name
