"""The package's folders are its layers, and imports only go down: core <- inputs <- models <- lab <- measures <-
judging <- pages <- report <- book. No module imports headlab inside a function (a lazy import that would hide a
cycle), there is no cycle between modules, and a page imports no other page."""

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import headlab

PACKAGE = Path(headlab.__file__).parent
LAYERS = ["core", "inputs", "models", "lab", "measures", "judging", "pages", "report", "book"]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def headlab_imports(tree: ast.AST):
    """(imported module, node) for every import of a headlab module, ``from headlab.x import y`` resolving y when
    it is a module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((a.name, node) for a in node.names if a.name.startswith("headlab"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("headlab"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                sub = PACKAGE.parent.joinpath(*candidate.split("."))
                yield (candidate if sub.with_suffix(".py").exists() or sub.is_dir() else node.module), node


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_module_lives_in_a_layer_folder():
    loose = [m for m in MODULES if layer_of(m) is None and m != "headlab"]
    assert not loose, f"modules outside the layer folders {LAYERS}: {loose}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_and_happen_at_module_level(module):
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    top_level = {id(n) for n in tree.body}
    own = layer_of(module)
    for target, node in headlab_imports(tree):
        if module == "headlab":  # the package's public surface may import from any layer
            continue
        assert id(node) in top_level or _in_type_checking(tree, node), (
            f"{module} imports {target} inside a function or block (line {node.lineno}): import it at the top"
        )
        theirs = layer_of(target)
        if theirs is not None:
            assert LAYERS.index(theirs) <= LAYERS.index(own), (
                f"{module} (layer {own}) imports {target} (layer {theirs}, higher): line {node.lineno}"
            )


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not MODULES[m].name == "__init__.py"))
def test_a_module_imports_its_siblings_directly_never_through_its_own_package(module):
    """``from headlab.report import charts`` inside ``headlab.report`` runs through the package's ``__init__``, which
    may import the module back: a cycle that works only by the order the names load in."""
    package = module.rsplit(".", 1)[0]
    through = [
        node.lineno
        for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module == package
    ]
    assert not through, f"{module} imports from its own package {package} at line(s) {through}: import the module"


def _in_type_checking(tree, node) -> bool:
    return any(
        isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test) and node in ast.walk(n) for n in tree.body
    )


def test_no_import_cycle_between_modules():
    graph = {
        m: {t for t, _ in headlab_imports(ast.parse(p.read_text(encoding="utf-8"))) if t in MODULES and t != m}
        for m, p in MODULES.items()
        if m != "headlab"
    }
    state: dict[str, int] = {}

    def visit(m, path):
        state[m] = 1
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*path[path.index(t) :], t]))
            if state.get(t) is None:
                visit(t, [*path, t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_the_contract_test_catches_an_upward_and_a_lazy_import():
    upward = ast.parse("from headlab.report import charts\n")
    assert [t for t, _ in headlab_imports(upward)] == ["headlab.report.charts"]
    assert LAYERS.index(layer_of("headlab.report.charts")) > LAYERS.index(layer_of("headlab.core.stats"))
    lazy = ast.parse("def f():\n    from headlab.core import stats\n")
    ((target, node),) = headlab_imports(lazy)
    assert target == "headlab.core.stats" and id(node) not in {id(n) for n in lazy.body}


@pytest.mark.parametrize("package", ["headlab", *(f"headlab.{layer}" for layer in LAYERS)])
def test_a_package_exports_existing_names_from_its_own_layer(package):
    """A layer's ``__init__`` imports its public names plainly (IDEs and mypy follow them), each from the layer itself
    (an export from a higher layer would be an upward import), and lists them in ``__all__``."""
    module = importlib.import_module(package)
    for name in module.__dict__.get("__all__", []):
        value = getattr(module, name)
        if not (inspect.ismodule(value) or inspect.isclass(value) or inspect.isfunction(value)):
            continue  # a constant tells no module
        source = value.__name__ if inspect.ismodule(value) else value.__module__
        assert package == "headlab" or source.startswith(f"{package}."), f"{package} exports {name} from {source}"
    with pytest.raises(AttributeError, match="no attribute 'not_exported'"):
        _ = module.not_exported


def test_no_package_loads_its_names_by_string():
    """No ``importlib`` string maps in a package's ``__init__``: every export is a statement tools can follow."""
    inits = [p for p in MODULES.values() if p.name == "__init__.py"]
    layers = {p.parent.name for p in inits if p.parent.parent == PACKAGE}
    assert layers == set(LAYERS) and len(inits) >= 1 + len(LAYERS)
    assert not [p for p in inits if "importlib" in p.read_text(encoding="utf-8")]


def test_the_layout_page_names_every_module():
    """``docs/layout.md`` is checked against the tree: every module of the package and of ``tools/`` is named there."""
    text = (PACKAGE.parent / "docs" / "layout.md").read_text(encoding="utf-8")
    tools = sorted((PACKAGE.parent / "tools").rglob("*.py"))
    stems = {p.stem for p in [*MODULES.values(), *tools] if p.stem not in ("__init__", "__main__")}
    assert not sorted(s for s in stems if f"`{s}`" not in text), "name them in docs/layout.md"


PAGE_REGISTRY = "headlab.pages.claims"  # gathers every page's claims: the one pages module that imports the others


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer_of(m) == "pages" and m != PAGE_REGISTRY))
def test_a_page_imports_measures_and_the_rule_never_another_page(module):
    """What two pages need is a measure (``headlab.measures``); a page that imported another would make one page's
    change move the other's verdicts unseen."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    others = sorted({t for t, _ in headlab_imports(tree) if layer_of(t) == "pages" and t != module})
    assert not others, f"{module} imports the page(s) {others}: move what they share into headlab.measures"


def test_the_page_rule_catches_a_page_importing_a_page():
    tree = ast.parse("from headlab.pages.term_matching import matching_heads\n")
    assert [layer_of(t) for t, _ in headlab_imports(tree)] == ["pages"]
