"""The chapters import backwards only: a file of chapter 1 uses nothing of chapters 2 to 4, nor
of the tools; a file of chapter 2 nothing of chapters 3 and 4, and so on; so a reader can stop at
the end of any chapter with nothing missing. Checked on every import and on every name a file
takes from a package's index (`F.gelu` through `import tinyattn.functional as F`), resolved to the
module that defines it."""
import ast
import importlib
import importlib.util
import pathlib

import pytest

import tinyattn

PACKAGE = pathlib.Path(tinyattn.__file__).parent

CHAPTERS = {
    1: ["engine", "plumbing", "arguments", "rng", "gradient_check", "optim", "ops.checks",
        "ops.elementwise", "ops.reductions", "ops.shape", "ops.matmul", "ops.linear", "ops.softmax",
        "ops.layer_norm", "functional.checks", "functional.basics",
        "functional.scaled_dot_product", "nn.checks", "nn.module", "nn.layers",
        "nn.multi_head_attention", "nn.transformer"],
    2: ["ops.elu_and_cumsum", "ops.flash_attention", "functional.positions", "functional.fused_attention",
        "functional.sparse_patterns", "functional.sliding_window", "functional.linear_attention",
        "nn.positions", "nn.causal_transformer", "nn.generation", "nn.decoder", "nn.experts"],
    3: ["safetensors", "tokenizer", "nn.checkpoints", "nn.pretrained"],
    4: ["nn.hooks", "interpretability", "nn.lora"],
}
# The indexes gather every chapter's names for `import tinyattn as ta`, `tinyattn.functional as F`
# and `tinyattn.nn as nn`; ops/__init__ gathers chapter 1's ops only.
INDEXES = {"tinyattn", "tinyattn.functional", "tinyattn.nn"}
CHAPTER_OF = {f"tinyattn.{name}": chapter for chapter, names in CHAPTERS.items() for name in names}
CHAPTER_OF["tinyattn.ops"] = 1
TOOLS = 9          # the tools come after every chapter

# A chapter-1 file that names a later chapter's function, and why.
EXCEPTIONS = {
    ("tinyattn.nn.multi_head_attention", "tinyattn.functional.positions"):
        "API.md puts rope=True (F.rope, chapter 2) on nn.MultiHeadAttention, a chapter-1 layer",
}


def module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def chapter(name):
    if name.startswith("tinyattn_tools") or name in ("tinyattn.viz", "tinyattn.__main__"):
        return TOOLS
    return CHAPTER_OF[name]


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


@pytest.mark.parametrize("path", FILES, ids=lambda path: module_name(path))
def test_a_file_uses_nothing_of_a_later_chapter(path):
    importer = module_name(path)
    later = {name: chapter(name) for name in used_modules(path)
             if chapter(name) > chapter(importer) and (importer, name) not in EXCEPTIONS}
    assert later == {}, f"{importer} (chapter {chapter(importer)}) uses {later}"


def test_every_module_has_its_chapter():
    named = {module_name(path) for path in FILES}
    assert {name for name in named if not name.startswith("tinyattn_tools")} - \
        {"tinyattn.viz", "tinyattn.__main__"} == set(CHAPTER_OF)


def test_the_checks_modules_hold_validators_only_and_use_chapter_1_alone():
    """checks.py of each package stands beside the chapters: any of them may import it, so it
    imports nothing beyond chapter 1."""
    for name in ("ops.checks", "functional.checks", "nn.checks"):
        path = PACKAGE / (name.replace(".", "/") + ".py")
        assert all(chapter(used) == 1 for used in used_modules(path)), name


def test_the_exception_is_still_needed():
    for importer, used in EXCEPTIONS:
        path = PACKAGE / (importer.removeprefix("tinyattn.").replace(".", "/") + ".py")
        assert used in used_modules(path)
