"""The learner's file, cut from tinyattn's own source by its syntax tree, so that it can never
drift from the code it teaches.

An exercise names its module and its units, the functions the learner writes ("Mul.backward",
"unbroadcast"). The file holds, in the order of the source:

  * the imports the units need (those of the module, and its own names, imported from it);
  * the helpers the exercise gives for reading (`given`), as they are;
  * each unit with its decorators, signature and docstring, and the rest of its body replaced by
    `raise NotImplementedError`; a unit that is a method comes inside its class, whose other
    methods are given as they are (all but `check`, the op's input validation).

The solution is the same file with tinyattn's bodies in place of the blanks, and a mutant is the
same file with one unit's body changed (`compose` takes the body of each unit).

The grader goes the other way (`splice`): tinyattn's module with the learner's units put back in
place of its own, for the copy of tinyattn that a check process imports.
"""
import ast
import builtins
import functools
import importlib
import inspect
import pathlib

BLANK = "raise NotImplementedError"
LINE_LIMIT = 99


class CuttingError(LookupError):
    """A unit or a given helper that the module no longer has in the shape the exercise expects."""


@functools.lru_cache(maxsize=None)
def source_of(module_name):
    """(the module's source file, its text, its syntax tree), read once per process."""
    path = pathlib.Path(inspect.getfile(importlib.import_module(module_name)))
    text = path.read_text()
    return path, text, ast.parse(text, str(path))


def top_level(tree, name, module_name):
    """The top-level definition (function, class or assignment) called `name`."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return node
        if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == name for target in node.targets):
            return node
    raise CuttingError(f"{module_name} has no top-level {name}")


def unit_node(tree, unit, module_name):
    """The function node of a unit, "function" or "Class.method"."""
    owner, _, method = unit.rpartition(".")
    node = top_level(tree, owner or method, module_name)
    if owner:
        node = next((item for item in getattr(node, "body", ()) if
                     isinstance(item, ast.FunctionDef) and item.name == method), None)
    if not isinstance(node, ast.FunctionDef):
        raise CuttingError(f"{module_name} has no function {unit}")
    return node


def first_line(node):
    """The node's first line, its decorators included (1-based)."""
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])


def body_start(function):
    """The first line of the function's body after its docstring (1-based)."""
    body = function.body
    has_docstring = (isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                     and isinstance(body[0].value.value, str))
    if has_docstring and len(body) == 1:
        raise CuttingError(f"{function.name} has nothing but a docstring to write")
    return body[1 if has_docstring else 0].lineno


def compose(exercise, bodies, header=""):
    """The learner's file of `exercise` with the body of each unit given by `bodies`: a dict from
    unit to "blank", "solution", or the source of a whole function (decorators and signature
    included, indented as in the module) to put in place of it."""
    _, text, tree = source_of(exercise.module)
    pieces = [top_level(tree, name, exercise.module) for name in
              {unit.rpartition(".")[0] or unit for unit in exercise.units} | set(exercise.given)]
    pieces.sort(key=first_line)
    code = pieces_cut(exercise, text, tree, pieces, bodies)
    solution = pieces_cut(exercise, text, tree, pieces, dict.fromkeys(exercise.units, "solution"))
    imports = imports_needed(tree, exercise.module, "\n\n".join(solution),
                             defined={getattr(piece, "name", None) for piece in pieces}
                             | set(exercise.given))
    text = "\n\n\n".join((["\n".join(imports)] if imports else []) + code) + "\n"
    return header.rstrip("\n") + "\n\n" + text if header else text


def pieces_cut(exercise, text, tree, pieces, bodies):
    """The source of each piece (a top-level class or function), with its units cut as `bodies`
    says and the `check` methods of its classes left out."""
    lines = text.splitlines()
    units = {unit: unit_node(tree, unit, exercise.module) for unit in exercise.units}
    cut = {}                          # first line -> (last line, the lines that replace them)
    for unit, node in units.items():
        body = bodies[unit]
        if body == "blank":
            indent = " " * node.body[-1].col_offset
            cut[body_start(node)] = (node.end_lineno, [indent + BLANK])
        elif body != "solution":
            cut[first_line(node)] = (node.end_lineno, body.rstrip("\n").split("\n"))
    for piece in pieces:             # an op's input validation: not part of the exercise
        for item in getattr(piece, "body", ()):
            if isinstance(item, ast.FunctionDef) and item.name == "check":
                cut[first_line(item)] = (item.end_lineno, [])
    code = []
    for piece in pieces:
        kept, line = [], first_line(piece)
        while line <= piece.end_lineno:
            if line in cut:
                last, replacement = cut[line]
                if not replacement:
                    while kept and not kept[-1].strip():     # the blank line before it too
                        kept.pop()
                kept += replacement
                line = last + 1
            else:
                kept.append(lines[line - 1])
                line += 1
        code.append("\n".join(kept))
    return code


def names_used(code):
    """Every name the code reads (locals included: they are filtered out by the caller)."""
    return {node.id for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Name)}


def imports_needed(tree, module_name, code, defined):
    """The import lines for the names `code` reads that the module imports or defines at its top
    level: its own import statements, trimmed to those names and grouped as they are (a blank
    line where the module has one), then `from module import ...` for its own definitions. The
    same lines serve the blank and the solution."""
    wanted = names_used(code) - defined - set(dir(builtins))
    lines, group, kept_group, previous_end = [], 0, None, None
    for node in tree.body:
        if isinstance(node, ast.Import):
            aliases = [a for a in node.names if (a.asname or a.name.partition(".")[0]) in wanted]
            kept = [f"import {a.name}" + (f" as {a.asname}" if a.asname else "") for a in aliases]
            wanted -= {a.asname or a.name.partition(".")[0] for a in aliases}
        elif isinstance(node, ast.ImportFrom):
            aliases = [a for a in node.names if (a.asname or a.name) in wanted]
            kept = [from_import(node.module, [a.name + (f" as {a.asname}" if a.asname else "")
                                              for a in aliases])] if aliases else []
            wanted -= {a.asname or a.name for a in aliases}
        else:
            continue
        if previous_end is not None and node.lineno > previous_end + 1:
            group += 1                        # a blank line before it in the module
        previous_end = node.end_lineno
        if kept:
            lines += ([""] if kept_group not in (None, group) else []) + kept
            kept_group = group
    own = sorted({name for node in tree.body for name in defined_names(node)} & wanted)
    if own:
        lines.append(from_import(module_name, own))
    return lines


def defined_names(node):
    """The names a top-level statement defines: a function's, a class's, assigned names."""
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [target.id for target in node.targets if isinstance(target, ast.Name)]
    return []


def from_import(module_name, names):
    """`from module import a, b`, wrapped in parentheses when longer than a line."""
    line = f"from {module_name} import {', '.join(names)}"
    if len(line) <= LINE_LIMIT:
        return line
    opening = f"from {module_name} import ("
    rows, row = [], opening
    for i, name in enumerate(names):
        item = name + (")" if i == len(names) - 1 else ",")
        if row != opening and len(row) + 1 + len(item) > LINE_LIMIT:
            rows.append(row)
            row = " " * len(opening) + item
        else:
            row += ("" if row == opening else " ") + item
    return "\n".join(rows + [row])


# ------------------------------------------------------------------------------------------------
# The learner's units put back into the module

WATCHING = '@__import__("tinyattn_tools.exercises.watching", fromlist=["watching"])'
WATCH = WATCHING + ".watched({!r})"                 # above each unit
OWN = WATCHING + ".in_the_learners_file"            # above a method the learner added


def pieces_of(exercise):
    """The names of the top-level definitions the learner's file holds for the exercise: the
    units' classes and functions, and the given helpers."""
    return {unit.rpartition(".")[0] or unit for unit in exercise.units} | set(exercise.given)


def splice(exercise, learner_text, learner_tree):
    """(tinyattn's source of the exercise's module with the learner's units in place of its own,
    {line of that source: line of the learner's file} for every line that is the learner's, the
    rest of the learner's file).

    Each unit comes as the learner wrote it, decorators included, indented to its place, with the
    grader's watch (watching.watched) as its innermost decorator; methods the learner added to a
    unit's class come after the unit, in the class, under watching.in_the_learners_file (both
    give the learner's functions the globals of the learner's file in place of the module's).
    The rest, the given helpers and the class's other methods among it, is tinyattn's, as the
    learner's file says. The rest of the learner's file is its other top-level statements
    (imports, helpers of the learner's own) at their lines, every other line blank: the check
    process runs it among the learner's functions' globals once tinyattn is imported, as Python
    would run the learner's file, and its errors tell the learner's lines.
    Raises CuttingError, naming the unit, if the learner's file lacks one."""
    _, text, tree = source_of(exercise.module)
    lines, written = text.splitlines(), learner_text.splitlines()
    cut = {}                          # first line -> (last line, [(text, learner's line)])
    for unit in exercise.units:
        original = unit_node(tree, unit, exercise.module)
        mine = unit_node(learner_tree, unit, "the file")
        replacement = taken(written, mine, original.col_offset, unit)
        owner = unit.rpartition(".")[0]
        if owner:
            known = {item.name for item in top_level(tree, owner, exercise.module).body
                     if isinstance(item, ast.FunctionDef)}
            for item in top_level(learner_tree, owner, "the file").body:
                if isinstance(item, ast.FunctionDef) and item.name not in known:
                    replacement += [("", None)] + taken(written, item, original.col_offset,
                                                        decorator=OWN)
        cut[first_line(original)] = (original.end_lineno, replacement)
    pieces = pieces_of(exercise)
    rest = [""] * len(written)
    for statement in learner_tree.body[has_docstring(learner_tree):]:
        if not pieces & set(defined_names(statement)):
            for number in range(first_line(statement), statement.end_lineno + 1):
                rest[number - 1] = written[number - 1]
    spliced, numbers, line = [], {}, 1
    while line <= len(lines):
        last, replacement = cut.get(line, (line, [(lines[line - 1], None)]))
        for new, learner_line in replacement:
            spliced.append(new)
            if learner_line is not None:
                numbers[len(spliced)] = learner_line
        line = last + 1
    return "\n".join(spliced) + "\n", numbers, "\n".join(rest) + "\n"


def taken(lines, node, indent, unit=None, decorator=None):
    """[(text, line number)] of the lines of `node` in `lines`, decorators included, moved to
    `indent` columns; with `unit`, the grader's watch of it just above the `def` (or another
    `decorator` there)."""
    shift = indent - node.col_offset
    decorator = WATCH.format(unit) if unit is not None else decorator
    taken_lines = []
    for number in range(first_line(node), node.end_lineno + 1):
        if decorator is not None and number == node.lineno:
            taken_lines.append((" " * indent + decorator, number))
        text = lines[number - 1]
        moved = " " * shift + text if shift >= 0 else text[min(-shift, indented(text)):]
        taken_lines.append((moved, number))
    return taken_lines


def indented(text):
    return len(text) - len(text.lstrip(" "))


def has_docstring(tree):
    first = tree.body[0] if tree.body else None
    return int(isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
               and isinstance(first.value.value, str))
