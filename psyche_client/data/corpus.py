"""A small real English corpus from text already on every machine that runs this project: the
docstrings of the CPython standard library (PSF license), extracted with `ast` in file order.
Its exact contents depend on the Python version that builds it."""

import ast
import inspect
import sysconfig
from pathlib import Path

SKIP_DIRS = {"test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages",
             "__pycache__", "turtledemo", "ensurepip"}


def _docstrings(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc and len(doc) >= 40:  # one-liners like "Return x." carry little language
                yield doc


def stdlib_docstrings(max_bytes: int = 8 << 20, stdlib=None) -> str:
    root = Path(stdlib or sysconfig.get_paths()["stdlib"])
    parts, size = [], 0
    for path in sorted(root.rglob("*.py")):
        if SKIP_DIRS & set(path.relative_to(root).parts):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for doc in _docstrings(tree):
            text = inspect.cleandoc(doc) + "\n\n"
            if size + len(text) > max_bytes:
                return "".join(parts)
            parts.append(text)
            size += len(text)
    return "".join(parts)
