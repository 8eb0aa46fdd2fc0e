"""import-linter contract type that also sees compiled extension modules.

grimp builds its graph from ``.py`` files only, so ``decoding._native`` (a C extension)
is not a node and ``from decoding import _native`` counts as importing ``decoding``.
``forbidden_ext`` is import-linter's ``forbidden`` contract run on a graph to which the
extension modules and the imports of them (read with ``ast`` by ``tests/layering.py``) are
added first; everything else (indirect imports, chains in the report) is unchanged.
Registered in pyproject.toml: ``contract_types = ["forbidden_ext: tests.importlinter_contracts.ExtensionAwareForbiddenContract"]``.
"""

from __future__ import annotations

from importlinter.contracts.forbidden import ForbiddenContract

from tests.layering import import_graph, modules

__all__ = ["ExtensionAwareForbiddenContract"]


class ExtensionAwareForbiddenContract(ForbiddenContract):
    def check(self, graph, verbose):
        known = modules()
        for name, path in known.items():
            if path is None and name not in graph.modules:
                graph.add_module(name)
        for importer, targets in import_graph().items():
            for imported, line in targets.items():
                if known.get(imported, "") is None and importer in graph.modules:
                    graph.add_import(importer=importer, imported=imported, line_number=line,
                                     line_contents=f"import of extension module {imported}")
        return super().check(graph, verbose)
