"""How much of tinyattn is argument checking, and how many checks one TransformerBlock forward makes.

    python dev/measure_checks.py [REPO]

Code lines: non-blank lines of Python that are not comments and not docstrings, in tinyattn/
outside tinyattn_tools/. A line is a checking line when it belongs to
  * a `raise` or `assert` statement, or an `if` statement whose body only raises;
  * a call statement of a function whose name starts with `check` (or, when attached at a
    signature, a `@door(...)` decorator);
  * a function or method named `check` or `check_*` (its whole body, docstring left out);
  * the module that holds the checking helpers (`arguments.py`).
"raise lines" counts the first kind only. The reading path is the bodies of the ops' `forward` and
`backward`, the layers' `forward`, the optimizers' `step` and the public functions of
`functional/` (names in its `__all__`).
"""
import ast
import io
import pathlib
import sys
import tokenize


def code_lines(source):
    """Line numbers holding code: not blank, not only a comment, not part of a docstring."""
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                              tokenize.DEDENT, tokenize.ENDMARKER):
            lines.update(range(token.start[0], token.end[0] + 1))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                lines -= set(range(first.lineno, first.end_lineno + 1))
    return lines


def span(node):
    return set(range(node.lineno, node.end_lineno + 1))


def called_name(call):
    function = call.func
    return function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")


def only_raises(body):
    return all(isinstance(statement, ast.Raise) for statement in body)


def checking_lines(tree):
    """(checking lines, raise-only lines) of a module."""
    checking, raising = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Raise, ast.Assert)):
            checking |= span(node)
            raising |= span(node)
        elif isinstance(node, ast.If) and only_raises(node.body) and not node.orelse:
            checking |= span(node)
            raising |= span(node)
        elif isinstance(node, (ast.Expr, ast.Assign)) and isinstance(node.value, ast.Call) \
                and called_name(node.value).startswith("check"):
            checking |= span(node)
        elif isinstance(node, (ast.FunctionDef,)):
            if node.name == "check" or node.name.startswith("check_"):
                checking |= span(node)
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and called_name(decorator) == "door":
                    checking |= span(decorator)
    return checking, raising


def reading_path(path, tree, functional_public):
    """Line numbers of the reading path in this module."""
    lines = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name in ("forward", "backward",
                                                                       "step"):
                    lines |= span(item)
        elif isinstance(node, ast.FunctionDef) and "functional" in path.parts \
                and node.name in functional_public:
            lines |= span(node)
    return lines


def measure(repo):
    package = pathlib.Path(repo) / "tinyattn"
    functional_init = ast.parse((package / "functional" / "__init__.py").read_text())
    public = set()
    for node in functional_init.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__all__":
            public = {element.value for element in node.value.elts}
    totals = dict(code=0, checking=0, raising=0, path_code=0, path_checking=0)
    for path in sorted(package.rglob("*.py")):
        if "tools" in path.relative_to(package).parts:
            continue
        source = path.read_text()
        tree = ast.parse(source)
        code = code_lines(source)
        checking, raising = checking_lines(tree)
        if path.name == "arguments.py":
            checking = set(code)
        on_path = reading_path(path.relative_to(package), tree, public) & code
        totals["code"] += len(code)
        totals["checking"] += len(checking & code)
        totals["raising"] += len(raising & code)
        totals["path_code"] += len(on_path)
        totals["path_checking"] += len(on_path & checking)
    return totals


def check_calls_per_block(repo):
    """Calls of checking functions (named check*, in arguments.py, or an op's `check`) during one
    forward of a TransformerBlock(64, 4) on a (2, 16, 64) batch, and the ops it applies."""
    sys.path.insert(0, str(repo))
    import numpy as np
    import tinyattn as ta
    block = ta.nn.TransformerBlock(64, 4)
    x = ta.tensor(np.random.default_rng(0).standard_normal((2, 16, 64)), requires_grad=True)
    block(x, is_causal=True)                    # warm up: imports done
    counts = dict(checks=0, op_checks=0, ops=0)

    def profile(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if code.co_name == "apply" and "engine" in code.co_filename:
            counts["ops"] += 1
        elif code.co_name == "check":
            counts["op_checks"] += 1
        elif code.co_name.startswith("<"):
            pass
        elif code.co_name.startswith("check") or code.co_name.endswith(("_fit", "_fits")) \
                or code.co_filename.endswith("arguments.py") \
                and code.co_name not in ("door", "attach", "guarded"):
            counts["checks"] += 1
    sys.setprofile(profile)
    block(x, is_causal=True)
    sys.setprofile(None)
    return counts


if __name__ == "__main__":
    repo = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    t = measure(repo)
    print(f"library (tinyattn/ outside tools/): {t['checking']}/{t['code']} code lines check "
          f"arguments = {100 * t['checking'] / t['code']:.1f}%; raise/assert/if-raise only: "
          f"{t['raising']} = {100 * t['raising'] / t['code']:.1f}%")
    print(f"reading path: {t['path_checking']}/{t['path_code']} = "
          f"{100 * t['path_checking'] / t['path_code']:.1f}%")
    calls = check_calls_per_block(repo)
    print(f"one TransformerBlock forward: {calls['checks']} calls of checking functions (check*, "
          f"*_fit(s), arguments.py) and {calls['op_checks']} of ops' check methods, for "
          f"{calls['ops']} ops")
