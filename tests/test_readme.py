"""The README's and the guide's examples run, every link resolves, and every table is generated and current."""

import re
from pathlib import Path

import pytest

from benchmarks import readme_tables

ROOT = Path(__file__).resolve().parent.parent


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.DOTALL)


@pytest.mark.timing  # The guide's AutoEcho example trains against sleeps.
def test_readme_and_guide_python_examples_run(capsys):
    blocks = [(path.name, block) for path in (ROOT / "README.md", ROOT / "docs" / "guide.md") for block in python_blocks(path)]
    assert len(blocks) >= 5  # Wrap your own pipeline, AutoEcho; the tour, AutoEcho in fit, pipelines.
    outputs = []
    for name, block in blocks:
        exec(compile(block, name, "exec"), {})
        outputs.append(capsys.readouterr().out)
    blocks = [block for _, block in blocks]
    tour = next(out for block, out in zip(blocks, outputs) if "stats.fresh" in block)
    fresh, emitted = tour.split()[:2]
    assert int(fresh) == 10 and 20 <= int(emitted) <= 30


def markdown_files() -> list[Path]:
    return [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))


def anchors_of(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_docs_exist_and_the_readme_links_them():
    text = (ROOT / "README.md").read_text()
    for page in ("guide.md", "domain.md", "choosing.md", "design.md", "results/README.md"):
        assert (ROOT / "docs" / page).exists() and f"](docs/{page})" in text


def test_the_readme_fits_on_one_screen_and_types_no_result_by_hand():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 100
    outside_tables = re.sub(r"<!-- table:(\w+) -->.*?<!-- /table:\1 -->", "", text, flags=re.DOTALL)
    assert not re.search(r"\d\.\d+x", outside_tables), "a speedup typed by hand"


def test_every_generated_table_is_current():
    # Tables are rewritten by `python -m benchmarks.readme_tables` from benchmarks/results/.
    assert readme_tables.stale_tables() == []
    marked = {name for path in readme_tables.pages() for name in re.findall(r"<!-- table:(\w+) -->", path.read_text())}
    assert {"demo", "time_to_target", "time_to_target_best", "controller_sweep", "throughput"} <= marked


def test_every_relative_link_resolves_inside_the_repository():
    checked = 0
    for path in markdown_files():
        text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # http(s) and mailto links leave the repository on purpose.
            file_part, _, anchor = target.partition("#")
            resolved = (path.parent / file_part).resolve() if file_part else path
            assert resolved.is_relative_to(ROOT), f"{path.name}: {target} leaves the repository"
            assert resolved.exists(), f"{path.name}: {target} does not exist"
            if anchor and resolved.suffix == ".md":
                assert anchor in anchors_of(resolved), f"{path.name}: no heading #{anchor} in {resolved.name}"
            checked += 1
    assert checked >= 10


def project_text_files() -> list[Path]:
    skipped = {".git", ".venv", "runs", "__pycache__"}
    return [p for p in ROOT.rglob("*") if p.is_file() and p.suffix in {".py", ".md", ".cfg", ".toml", ""}
            and p.relative_to(ROOT).parts[:2] != ("benchmarks", "results")
            and not any(part in skipped or part.endswith(".egg-info") for part in p.relative_to(ROOT).parts)]


def test_nothing_in_the_project_refers_outside_the_repository():
    # Every relative path climbing out of its folder, and every Markdown file named, must
    # be a file of this repository: a user clones this and nothing else.
    markdown_here = {p.name for p in ROOT.rglob("*.md") if ".venv" not in p.parts}
    checked = 0
    for path in project_text_files():
        text = path.read_text(errors="replace")
        for target in re.findall(r"(?:\.\./)+[\w.\-/]*", text):
            resolved = (path.parent / target.split("#")[0]).resolve()
            assert resolved.is_relative_to(ROOT) and resolved.exists(), f"{path.relative_to(ROOT)}: {target}"
            checked += 1
        for name in re.findall(r"\b[\w\-]+\.md\b", text):
            assert name in markdown_here, f"{path.relative_to(ROOT)} names {name}, which is not in the repository"
    assert checked >= 5


def test_readme_gives_the_two_setup_commands():
    text = (ROOT / "README.md").read_text()
    assert 'pip install -e ".[test,bench]" && python -m benchmarks.demo' in text
    assert "python -m pytest" in text
    assert "python -m pytest" in (ROOT / ".ci" / "run").read_text()


def documented_names(page: Path, package: str) -> set[str]:
    """The names in the first column of a page's table headed by ``package``."""
    table = re.search(rf"^\| `{package}` \|.*?\n\n", page.read_text(), re.MULTILINE | re.DOTALL).group(0)
    cells = [line.split("|")[1] for line in table.splitlines()[2:] if line.strip()]
    return {re.match(r"\w+", name).group(0) for cell in cells for name in re.findall(r"`([^`]+)`", cell)}


@pytest.mark.parametrize("package", ["echoing", "pipelines"])
def test_the_public_names_the_guide_documents_are_the_packages_all(package):
    module = __import__(package)
    assert documented_names(ROOT / "docs" / "guide.md", package) == set(module.__all__)


def test_no_commit_hash_outside_the_decision_records():
    # History, with the commits that hold it, lives in docs/decisions/ only.
    root = ROOT
    commit = re.compile(r"(?<![0-9A-Za-z_])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
    files = [root / "README.md"] + [p for p in (root / "docs").rglob("*.md") if "decisions" not in p.parts]
    files += [p for d in ("echoing", "benchmarks", "pipelines", "tests", "examples") for p in (root / d).rglob("*.py")]
    found = [(str(f.relative_to(root)), m) for f in files for m in commit.findall(f.read_text())]
    assert not found, found


def commands_named(text: str) -> set[str]:
    """The distinct ``python -m ...`` commands a page names, each with its options."""
    return {" ".join(match.split()) for match in re.findall(r"python -m [\w.]+(?: --?[\w-]+(?: [\w./=-]+)*)*", text)}


def test_no_results_page_names_more_than_eight_commands():
    # A page lists its named plans (benchmarks/lib/plans.py), not a log of invocations.
    assert commands_named("`python -m benchmarks.demo --quick`; python -m benchmarks.demo") == {
        "python -m benchmarks.demo --quick", "python -m benchmarks.demo"}
    for page in sorted((ROOT / "docs" / "results").glob("*.md")):
        commands = commands_named(page.read_text())
        assert len(commands) <= 8, (page.name, sorted(commands))
