"""Every public name of headlab says what it is for, and every table a finding returns names its columns.

A public name is a module-level function or class whose name does not start with ``_``, defined in that module (not
imported into it), and the methods and properties of such a class whose names do not start with ``_``. Each needs a
docstring of its own: a dataclass's generated ``Name(field, ...)`` text and a docstring inherited from a parent class
do not count.

The functions that return tables (annotated ``-> pd.DataFrame``, ``-> tuple[pd.DataFrame, ...]`` or either or
``None``) in :data:`TABLE_MODULES` spell their columns out, as TransformerLens spells out shapes: a line of the
docstring starts with ``Columns:`` (or ``Columns of <which table>:``, one per table of a tuple) and goes on to name
them, e.g. ``Columns: layer, head, rel_change, ...``.
"""

import ast
import dataclasses
import importlib
import inspect
import re
from pathlib import Path

import pytest

import headlab

PACKAGE = Path(headlab.__file__).parent
MODULES = sorted(
    ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
    for p in PACKAGE.rglob("*.py")
)
TABLE_MODULES = ["headlab.core.sweep", "headlab.measures.halves", "headlab.measures.order"]
COLUMNS_LINE = re.compile(r"^\s*Columns(?: of [^:\n]+)?:[ \t]*\S", flags=re.M)
TABLE = r"(?:pd\.|pandas\.(?:core\.frame\.)?)?DataFrame"
TABLES = re.compile(rf"^(?:{TABLE}|tuple\[{TABLE}(?:, {TABLE})*\])(?: \| None)?$")


def own_doc(obj) -> str | None:
    """The docstring ``obj`` itself was written with (None for a dataclass's generated one or an inherited one)."""
    if isinstance(obj, property):
        obj = obj.fget
    elif isinstance(obj, (classmethod, staticmethod)):
        obj = obj.__func__
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
    if inspect.isclass(obj) and dataclasses.is_dataclass(obj) and doc and doc.startswith(f"{obj.__name__}("):
        return None
    return doc if doc and doc.strip() else None


def is_routine(obj) -> bool:
    return inspect.isfunction(obj) or isinstance(obj, (property, classmethod, staticmethod))


def public_names(module) -> dict[str, object]:
    """``qualified name -> object`` of the module's public functions and classes and those classes' public methods."""
    found = {}
    for name, obj in vars(module).items():
        if name.startswith("_") or not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        if obj.__module__ != module.__name__ or obj.__qualname__ != name:  # imported, or an alias or lambda
            continue
        found[name] = obj
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if not attr.startswith("_") and is_routine(member):
                    found[f"{name}.{attr}"] = member
    return found


def script_names(path: Path) -> dict[str, ast.AST]:
    """The public top-level functions and classes of a ``__main__`` module, read without running it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        n.name: n
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not n.name.startswith("_")
    }


def undocumented(module_name: str) -> list[str]:
    if module_name.endswith(".__main__"):  # importing it would run it
        path = PACKAGE.parent.joinpath(*module_name.split(".")).with_suffix(".py")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        missing = [] if ast.get_docstring(tree) else ["(module)"]
        return missing + [n for n, node in script_names(path).items() if not ast.get_docstring(node)]
    module = importlib.import_module(module_name)
    missing = [] if module.__doc__ and module.__doc__.strip() else ["(module)"]
    return missing + [n for n, obj in public_names(module).items() if own_doc(obj) is None]


def where(module_name: str, qualname: str) -> str:
    """``path:line`` of a public name, for the failure message."""
    module = importlib.import_module(module_name)
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part) if obj is module else vars(obj)[part]
    if isinstance(obj, property):
        obj = obj.fget
    elif isinstance(obj, (classmethod, staticmethod)):
        obj = obj.__func__
    try:
        return f"{Path(inspect.getsourcefile(obj)).relative_to(PACKAGE.parent)}:{inspect.getsourcelines(obj)[1]}"
    except (OSError, TypeError):
        return module_name


@pytest.mark.parametrize("module_name", MODULES)
def test_every_public_name_has_a_docstring(module_name):
    missing = undocumented(module_name)
    if missing and not module_name.endswith(".__main__"):
        missing = [f"{n} ({where(module_name, n)})" if n != "(module)" else n for n in missing]
    assert not missing, f"{module_name}: public names without a docstring: {missing}"


def return_annotation(func) -> str:
    annotation = inspect.signature(func, eval_str=False).return_annotation
    if annotation is inspect.Signature.empty:
        return ""
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def table_functions(module_name: str) -> dict[str, tuple[object, int]]:
    """``name -> (function, number of tables it returns)`` for the module's public functions and methods."""
    found = {}
    for name, obj in public_names(importlib.import_module(module_name)).items():
        func = obj.fget if isinstance(obj, property) else getattr(obj, "__func__", obj)
        if not inspect.isfunction(func):
            continue
        annotation = return_annotation(func)
        if TABLES.match(annotation):
            found[name] = (func, len(re.findall(TABLE, annotation)))
    return found


@pytest.mark.parametrize("module_name", TABLE_MODULES)
def test_every_table_a_finding_returns_names_its_columns(module_name):
    tables = table_functions(module_name)
    assert tables, f"{module_name} has no function annotated to return a DataFrame: is the annotation read?"
    unnamed = [
        f"{name} ({where(module_name, name)}: {n} table(s), {len(COLUMNS_LINE.findall(func.__doc__ or ''))} "
        f"'Columns:' line(s))"
        for name, (func, n) in tables.items()
        if len(COLUMNS_LINE.findall(func.__doc__ or "")) < n
    ]
    assert not unnamed, f"{module_name}: tables whose docstring has no line starting 'Columns:': {unnamed}"


def test_the_checks_catch_a_missing_docstring_and_unnamed_columns():
    namespace = {"__name__": "fake"}
    exec(
        "import dataclasses\nimport pandas as pd\n"
        "@dataclasses.dataclass\nclass Plain:\n    x: int = 0\n    def run(self):\n        return 1\n"
        "class Told:\n    '''Says why.'''\n    @property\n    def size(self):\n        '''How big.'''\n"
        "def table() -> pd.DataFrame:\n    '''A table.\n\n    Columns: a, b\n    '''\n"
        "def two() -> tuple[pd.DataFrame, pd.DataFrame]:\n    '''Two tables.\n\n    Columns: a, b\n    '''\n"
        "def _private():\n    pass\n",
        namespace,
    )
    fake = type(importlib)("fake")
    fake.__dict__.update(namespace)
    names = public_names(fake)
    assert sorted(n for n, obj in names.items() if own_doc(obj) is None) == ["Plain", "Plain.run"]
    assert TABLES.match(return_annotation(namespace["table"])) and TABLES.match(return_annotation(namespace["two"]))
    assert TABLES.match("pd.DataFrame | None") and not TABLES.match("dict[str, pd.DataFrame]")
    assert len(COLUMNS_LINE.findall(namespace["table"].__doc__)) == 1
    assert len(COLUMNS_LINE.findall(namespace["two"].__doc__)) == 1 < 2  # the second table is not named
    assert not COLUMNS_LINE.search("The columns: a, b") and not COLUMNS_LINE.search("Columns:\n")


def test_the_type_checker_covers_core_and_lab():
    """``make test-fast`` runs mypy on the files pyproject.toml names: the engine (core) and the notebooks' entry
    point (lab) must stay among them."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    assert {"headlab/core", "headlab/lab"} <= set(config["tool"]["mypy"]["files"])
    assert config["tool"]["ruff"]["line-length"] == 120


# a shape written the other ways: "(pairs x grades)" or "(L, H, T, T)"
OTHER_SHAPE = re.compile(r"\((?:[a-z_]+ x [a-z_]+|L, H\b)")


def test_shapes_are_written_one_way():
    """A tensor's or a table's shape is written as its axes' names in parentheses, ``(layers, heads, tokens, tokens)``
    (TransformerLens names its axes in the same place), never ``(pairs x grades)`` nor ``(L, H, T, T)``."""
    other = [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OTHER_SHAPE.search(line)
    ]
    assert not other, other[:5]
