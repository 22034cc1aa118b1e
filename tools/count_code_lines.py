"""Count the code lines of recordkit's source, by package: no blank lines, comments, docstrings or generated code.

A line counts when it holds a token of code. Docstrings (the first statement of a module, class or function,
when it is a string) do not count, nor do the generated protobuf modules (``_proto/``'s ``*_pb2.py`` and
``*_pb2.pyi``). A package is the first folder under ``src/recordkit`` (``io``, ``formats``); the modules
directly in it count as ``recordkit``.

Run: ``python tools/count_code_lines.py [SRC]`` (default: ``src/recordkit`` beside this folder). Prints a line
per package and the total.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from collections import Counter
from pathlib import Path

_NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}


def _docstring_lines(tree: ast.Module) -> set[int]:
    """The lines of every docstring in ``tree``."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                first = body[0]
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def code_lines(text: str) -> int:
    """The number of lines of ``text`` (Python source) that hold code.

    >>> code_lines('\"\"\"Doc.\"\"\"\\n\\n# a comment\\nx = 1  # and a comment\\n\\ndef f():\\n    \"\"\"Doc.\"\"\"\\n    return x\\n')
    3
    """
    docstrings = _docstring_lines(ast.parse(text))
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in _NOT_CODE:
            continue
        for line in range(token.start[0], token.end[0] + 1):
            if line not in docstrings:
                lines.add(line)
    return len(lines)


def _generated(path: Path) -> bool:
    return "_proto" in path.parts and path.name.endswith(("_pb2.py", "_pb2.pyi", "_pb2_grpc.py"))


def count(root: Path) -> Counter[str]:
    """Code lines per package of the source tree ``root`` (``src/recordkit``)."""
    counts: Counter[str] = Counter()
    for path in sorted(root.rglob("*.py")):
        if _generated(path):
            continue
        relative = path.relative_to(root)
        package = relative.parts[0] if len(relative.parts) > 1 else "recordkit"
        counts[package] += code_lines(path.read_text(encoding="utf-8"))
    return counts


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else Path(__file__).resolve().parent.parent / "src" / "recordkit"
    counts = count(root)
    width = max(map(len, counts), default=5)
    for package, lines in sorted(counts.items(), key=lambda item: -item[1]):
        print(f"{package:<{width}}  {lines:>6}")
    print(f"{'total':<{width}}  {sum(counts.values()):>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
