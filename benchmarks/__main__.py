"""``python -m benchmarks``: the index of the benchmarks, one line each.

Every entry runs as ``python -m benchmarks.NAME`` and takes ``--help``. Runs write to
``runs/`` (ignored by git) unless given ``--output-dir``; the commands that regenerate
the committed results under ``benchmarks/results/`` are named in the README.
"""

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def entry_points() -> list[tuple[str, str]]:
    """(name, first docstring line) of every module that runs as a command: the experiments, then the library's ("lib.plots")."""
    found = []
    for path in sorted(PACKAGE.glob("*.py")) + sorted((PACKAGE / "lib").glob("*.py")):
        if path.name.startswith("_"):
            continue
        source = path.read_text()
        if 'if __name__ == "__main__":' not in source:
            continue  # A helper module (models, results_io), not a command.
        docstring = ast.get_docstring(ast.parse(source)) or ""
        name = path.stem if path.parent == PACKAGE else f"lib.{path.stem}"
        found.append((name, docstring.splitlines()[0] if docstring else ""))
    return found


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] not in ("-h", "--help"):
        sys.exit(f"python -m benchmarks takes no arguments (got {argv!r}); run python -m benchmarks.NAME --help")
    print("Benchmarks; run one with `python -m benchmarks.NAME` (each takes --help):\n")
    width = max(len(name) for name, _ in entry_points())
    for name, line in entry_points():
        print(f"  {name:<{width}}  {line}")


if __name__ == "__main__":
    main()
