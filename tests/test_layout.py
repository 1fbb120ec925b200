"""The code's import directions: library <- pipelines <- benchmarks, and no experiment leans on another."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The benchmarks' shared parts: what every experiment may use.
SHARED = {"results_io", "tasks", "training", "replay", "wallclock", "models", "reporting", "plots", "step_times",
          "progress"}
# The report part: renders every experiment's records into the documentation.
REPORT = {"readme_tables", "__main__", "__init__"}


def imported_modules(path: Path) -> set[str]:
    """Top-level and nested imports of a file, as dotted module names (``from a import b`` gives ``a.b`` and ``a``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def modules_of(package: str) -> dict[str, set[str]]:
    return {path.stem: imported_modules(path) for path in sorted((ROOT / package).glob("*.py"))}


def test_the_library_imports_neither_pipelines_nor_benchmarks():
    for name, imports in modules_of("echoing").items():
        assert not {m for m in imports if m.split(".")[0] in ("pipelines", "benchmarks")}, name


def test_pipelines_import_no_benchmark():
    for name, imports in modules_of("pipelines").items():
        assert not {m for m in imports if m.split(".")[0] == "benchmarks"}, name


def test_experiments_import_only_the_shared_parts():
    modules = modules_of("benchmarks")
    experiments = set(modules) - SHARED - REPORT
    assert {"demo", "time_to_target", "auto_echo", "xla_check", "controller_sweep"} <= experiments
    for name in experiments:
        used = {m.split(".")[1] for m in modules[name] if m.startswith("benchmarks.")}
        assert used <= SHARED, f"{name} imports the experiment(s) {sorted(used - SHARED)}"


def test_shared_parts_import_no_experiment():
    modules = modules_of("benchmarks")
    for name in SHARED:
        used = {m.split(".")[1] for m in modules[name] if m.startswith("benchmarks.")}
        assert used <= SHARED, f"{name} imports {sorted(used - SHARED)}"


def test_no_code_outside_the_tasks_branches_on_a_tasks_name():
    import re

    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        if path.name == "tasks.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            assert not re.search(r"""\.name\s*[!=]=|[!=]=\s*["'](resnet|transformer)["']""", line), f"{path.name}:{number}: {line.strip()}"
