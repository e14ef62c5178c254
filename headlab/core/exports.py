"""The public names of a package, imported on first use (PEP 562).

A package lists ``name -> module`` and gets the ``__getattr__`` and ``__dir__`` that load a name's module the first
time the name is read: ``from headlab.core import run_sweep`` then imports the sweep engine only, and ``python -m``
on one of the package's modules runs that module once, not after its package has already imported it. Each
package maps names to its own modules (``tests/test_layers.py``), so this never hides an import cycle.
"""

import importlib


def exports(package: str, public: dict[str, str]):
    """``(__all__, __getattr__, __dir__)`` for ``package``, whose names in ``public`` live in the given modules
    (a name that maps to ``package.name`` is that module itself)."""

    def __getattr__(name):
        if name not in public:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(public[name])
        return module if module.__name__ == f"{package}.{name}" else getattr(module, name)

    def __dir__():
        return sorted([*vars(importlib.import_module(package)), *public])

    return sorted(public), __getattr__, __dir__
