"""The package's architecture, enforced: the layers of pyproject.toml's import-linter contract
(cli > scoring | baselines > pipeline > build > formats | synth > catalogs > plugins > signal >
store_view > storage | commitment > conventions > base modules), no import cycle (imports for
annotations only included), no import of a seisctf module inside a function except where
`LAZY_IMPORTS_ALLOWED` says why, and no module over `MAX_LINES` lines."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "seisctf"
MAX_LINES = 600

VERB_RUNNER = (
    "a CLI verb imports the library code it runs inside its runner (`_run_*`), so that "
    "`seisctf --help` and each verb load only what they use: the SeisBench picker brings torch, "
    "the ingests obspy, the recipe engine and the referees their own dependencies"
)
# Function-level imports of seisctf modules that stay, and why: {(module, function name
# prefix): reason}. Every other seisctf import sits at the top of its module, where a reader,
# grimp and import-linter see it. Imports of heavy optional dependencies (torch, seisbench)
# inside functions are not seisctf imports and are not restricted here.
LIGHT_COMMAND_LINE = (
    "building the parser and the verbs' checks load no Dask, xarray, zarr or pandas, so a "
    "mistake is answered before the cluster starts, in well under a second: the cluster, the "
    "storage module (for --storage-option and for judging an error) and a long help's figures "
    "are imported where they are used"
)
LAZY_IMPORTS_ALLOWED: dict[tuple[str, str], str] = {
    ("seisctf", "__getattr__"): (
        "the package exports `open_store` on first use, so `import seisctf.cli` does not load "
        "xarray, zarr and Dask for it"
    ),
    ("seisctf.formats.seisbench", "__getattr__"): (
        "the package exports `seisbench_dataset` and the training pipeline on first use, so "
        "that importing an ingest or the command line does not load SeisBench and torch"
    ),
    ("seisctf.catalogs", "__getattr__"): (
        "the contract's first names of `seisctf.formats.seisbench`'s exports, forwarded on "
        "first use (SeisBench and torch load only then)"
    ),
    ("seisctf.cli.baseline", "_run_"): VERB_RUNNER,
    ("seisctf.cli.compare", "_run_"): VERB_RUNNER,
    ("seisctf.cli.datasets", "_run_"): VERB_RUNNER,
    ("seisctf.cli.ingest", "_run_"): VERB_RUNNER,
    ("seisctf.cli.picks", "_run_"): VERB_RUNNER,
    ("seisctf.cli.score", "_run_"): VERB_RUNNER,
    ("seisctf.cli.serve", "_run_"): VERB_RUNNER,
    ("seisctf.cli", "dask_client"): LIGHT_COMMAND_LINE,
    ("seisctf.cli", "_storage_failure"): LIGHT_COMMAND_LINE,
    ("seisctf.cli", "_check_buckets"): LIGHT_COMMAND_LINE,
    ("seisctf.cli._parse", "storage_options"): LIGHT_COMMAND_LINE,
    ("seisctf.cli.datasets", "_help_"): LIGHT_COMMAND_LINE,
    ("seisctf.synth.output_sizes", "das_slot_plan"): (
        "the checks of `synth` and `demo` size their outputs before the cluster starts: the "
        "filter design (scipy) is loaded only when a DAS record is sized"
    ),
    ("seisctf.cli._recipe_checks", "check_recipe"): (
        "build checks its recipe before the cluster starts: the engine (with every generator "
        "the registries load) is imported only when `build` runs"
    ),
    ("seisctf.cli.baseline", "_check_baseline"): (
        "`baseline zoo` checks its model names before the cluster starts: the zoo's modules are "
        "imported only when `baseline` runs"
    ),
    ("seisctf.cli._locking", "_outputs_of_"): (
        "the demo's database is found by the module that writes it, imported only when `demo` runs"
    ),
}


def module_name(path: Path) -> str:
    """The dotted module name of a file of the package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_module(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    """The absolute module a `from ... import` names (relative imports resolved)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def function_level_imports(
    module: str, source: str, is_package: bool = False
) -> list[tuple[str, int, str]]:
    """Imports of seisctf modules inside the functions of one module's source: (function,
    line, imported module), sorted."""
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [imported_module(module, node, is_package)]
            else:
                continue
            for name in names:
                if name == "seisctf" or name.startswith("seisctf."):
                    found.append((function.name, node.lineno, name))
    return sorted(set(found))


def allowed(module: str, function: str) -> bool:
    """Whether the allow-list keeps a function-level import in `module`.`function`."""
    return any(
        module == allowed_module and function.startswith(prefix)
        for allowed_module, prefix in LAZY_IMPORTS_ALLOWED
    )


def package_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """The import cycles: every strongly connected set of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def test_layers_contract_holds():
    """`lint-imports` keeps pyproject.toml's layered contract (function-level imports count)."""
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports;"
            " sys.exit(lint_imports(no_cache=True, no_logo=True))",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def import_graph() -> grimp.ImportGraph:
    """seisctf's imports, those under `if TYPE_CHECKING:` included."""
    return grimp.build_graph("seisctf", exclude_type_checking_imports=False, cache_dir=None)


def test_no_import_cycles():
    """No two seisctf modules import each other, directly or through others, not even for
    annotations only (`if TYPE_CHECKING:`): a type two modules share lives in the one below, or
    in a small module of its own."""
    cycles = strongly_connected(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_import_graph_holds_type_only_imports():
    """The graph the cycle check walks has the imports under `if TYPE_CHECKING:` (one such
    import, of a module above, is in the package)."""
    source = (PACKAGE / "formats" / "obspy_archive" / "placed_traces.py").read_text()
    assert "if TYPE_CHECKING:\n    from seisctf.formats.obspy_archive.scan_table import" in source
    imported = import_graph().find_modules_directly_imported_by(
        "seisctf.formats.obspy_archive.placed_traces"
    )
    assert "seisctf.formats.obspy_archive.scan_table" in imported


def test_no_function_level_seisctf_imports():
    """seisctf modules are imported at the top of a module, except as LAZY_IMPORTS_ALLOWED says."""
    found = [
        f"{path.relative_to(ROOT)}:{line} {function}() imports {name}"
        for path in package_files()
        for function, line, name in function_level_imports(
            module_name(path), path.read_text(), path.name == "__init__.py"
        )
        if not allowed(module_name(path), function)
    ]
    assert not found, "function-level imports of seisctf modules:\n" + "\n".join(found)


def test_every_allowed_lazy_import_is_used():
    """The allow-list names only places that still import inside functions."""
    used = {
        (module_name(path), prefix)
        for path in package_files()
        for function, _, _ in function_level_imports(
            module_name(path), path.read_text(), path.name == "__init__.py"
        )
        for module, prefix in LAZY_IMPORTS_ALLOWED
        if module == module_name(path) and function.startswith(prefix)
    }
    assert set(LAZY_IMPORTS_ALLOWED) <= used, f"unused: {set(LAZY_IMPORTS_ALLOWED) - used}"


def project_files() -> list[Path]:
    """Every Python file of the project: the package, its tests, benchmarks and tools."""
    return sorted(
        path
        for folder in ("seisctf", "tests", "benchmarks", "experiments")
        if (ROOT / folder).is_dir()
        for path in (ROOT / folder).rglob("*.py")
    )


def test_no_module_over_600_lines():
    """Every Python file of the project (package, tests, benchmarks) fits in MAX_LINES lines."""
    long = {
        str(path.relative_to(ROOT)): n
        for path in project_files()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_function_level_import_finder():
    """The finder resolves relative imports, sees imports nested in blocks of a function and
    leaves module-level and non-seisctf imports alone; the allow-list matches runners only."""
    source = (
        "import seisctf.keys\n"
        "def f():\n"
        "    if True:\n"
        "        from . import storage\n"
        "    import numpy\n"
        "def _run_x():\n"
        "    from seisctf.cli import _parse\n"
        "    import seisctf.errors\n"
    )
    assert function_level_imports("seisctf.cli.probe", source) == [
        ("_run_x", 7, "seisctf.cli"),
        ("_run_x", 8, "seisctf.errors"),
        ("f", 4, "seisctf.cli"),
    ]
    assert module_name(PACKAGE / "cli" / "__init__.py") == "seisctf.cli"
    assert allowed("seisctf.cli.datasets", "_run_build")
    assert not allowed("seisctf.cli.datasets", "helper")
    assert not allowed("seisctf.pipeline.splits", "_run_x")
