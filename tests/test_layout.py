"""The code's import directions: library <- pipelines <- benchmarks, and no experiment leans on another."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The top of benchmarks/: experiments (one per results page), and the report part that
# renders every experiment's records into the documentation.
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


def library_modules() -> dict[str, set[str]]:
    """Every module of ``echoing``, its sub-packages included, by dotted name, with what it imports."""
    modules = {}
    for path in sorted((ROOT / "echoing").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = imported_modules(path)
    return modules


def test_the_layout_test_reaches_every_part_of_the_library():
    names = set(library_modules())
    assert {"echoing", "echoing.echo", "echoing.control.policy", "echoing.control.windows", "echoing.service",
            "echoing.service.watchdog", "echoing.service.servers"} <= names


def test_the_library_imports_neither_pipelines_nor_benchmarks():
    for name, imports in library_modules().items():
        assert not {m for m in imports if m.split(".")[0] in ("pipelines", "benchmarks")}, name


def test_only_the_package_and_the_service_itself_import_the_service():
    # A transformation knows nothing of where it is deployed: the echo stage leaves its
    # marks, and the service reads them (echoing/echo.py's ECHO_MARK).
    for name, imports in library_modules().items():
        if name == "echoing" or name.startswith("echoing.service"):
            continue
        assert not {m for m in imports if m.startswith("echoing.service") or m == "echoing.service"}, name


def test_the_laws_parts_import_neither_the_controller_nor_its_callers():
    # echoing/control/ holds the law's parts (windows, estimate, policy); the controller
    # composes them and AutoEcho drives the controller, so every arrow points down.
    above = {"echoing.controller", "echoing.auto_echo", "echoing.simulation", "echoing.testing"}
    for name, imports in library_modules().items():
        if name.startswith("echoing.control."):
            assert not imports & above, (name, sorted(imports & above))


def test_pipelines_import_no_benchmark():
    for name, imports in modules_of("pipelines").items():
        assert not {m for m in imports if m.split(".")[0] == "benchmarks"}, name


def benchmark_imports(imports: set[str]) -> set[str]:
    """The modules of benchmarks/ among ``imports``: "lib.tasks" for the library's, "demo" for an experiment."""
    used = set()
    for m in imports:
        parts = m.split(".")
        if parts[0] == "benchmarks" and len(parts) > 1:
            used.add(".".join(parts[1:3]) if parts[1] == "lib" and len(parts) > 2 else parts[1])
    return used - {"lib"}


def test_benchmarks_are_a_library_and_experiments_and_nothing_else():
    top = {path.stem for path in (ROOT / "benchmarks").glob("*.py")}
    experiments = top - REPORT
    assert {"demo", "time_to_target", "controller_sweep", "service_processes", "grain_echo"} <= experiments
    assert {path.name for path in (ROOT / "benchmarks").iterdir() if path.is_dir()} <= {"lib", "results", "__pycache__"}
    library = modules_of("benchmarks/lib")
    assert {"tasks", "training", "replay", "results_io", "reporting", "plots"} <= set(library)


def test_experiments_import_only_the_library():
    modules = modules_of("benchmarks")
    for name in set(modules) - REPORT:
        used = benchmark_imports(modules[name])
        assert all(u.startswith("lib.") for u in used), f"{name} imports the experiment(s) {sorted(u for u in used if not u.startswith('lib.'))}"


def test_the_library_imports_no_experiment():
    for name, imports in modules_of("benchmarks/lib").items():
        used = benchmark_imports(imports)
        assert all(u.startswith("lib.") for u in used), f"lib/{name} imports {sorted(used)}"


def test_no_code_outside_the_tasks_branches_on_a_tasks_name():
    import re

    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        if path.name == "tasks.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            assert not re.search(r"""\.name\s*[!=]=|[!=]=\s*["'](resnet|transformer)["']""", line), f"{path.name}:{number}: {line.strip()}"


# The string-keyed subscripts benchmarks/ may hold outside results I/O, each a mapping that
# is not a result: registries of tasks, a model's keyword arguments, grain's iterator
# state, the environment.
NOT_RESULTS = {
    ("demo.py", "TASKS['resnet']"), ("demo.py", "model['width']"),
    ("text_reservoir.py", "TASKS['transformer']"), ("text_reservoir.py", "_TASK.model['sequence_length']"),
    ("tasks.py", "self.settings.model['sequence_length']"),
    ("grain_echo.py", "state['index']"),
    ("__init__.py", "os.environ['TF_CPP_MIN_LOG_LEVEL']"),
}
RESULTS_IO = {"results_io.py", "run_records.py"}


def test_results_are_read_through_records_only_results_io_reads_their_keys():
    found = set()
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        if path.name in RESULTS_IO:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                    and isinstance(node.slice.value, str) and not isinstance(node.ctx, ast.Store)):
                found.add((path.name, ast.unparse(node)))
    assert found <= NOT_RESULTS, sorted(found - NOT_RESULTS)


def test_no_benchmark_module_is_over_450_lines():
    # One study a module; shared parts go to benchmarks/lib/.
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        assert len(path.read_text().splitlines()) <= 450, path.relative_to(ROOT)
