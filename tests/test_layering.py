"""Layering checks that import-linter cannot state for every module (see tests/layering.py);
the package-level contracts are in pyproject.toml ([tool.importlinter], run by ``make lint``)."""

from layering import chain, cycles, import_graph, modules, runtime_closure


def test_graph_sees_the_extension_and_its_importers():
    """The graph is sound: the C extension is a node, imported by the DFA index."""
    assert "decoding._native" in modules()
    graph = import_graph()
    assert any("decoding._native" in targets for targets in graph.values())


def test_no_import_cycle_in_decoding():
    """One cycle per knot (strongly connected component), each step with its line."""
    graph = import_graph()
    found = cycles(graph)
    report = "\n\n".join("\n".join(f"  {a} -> {b}  (line {graph[a][b]})" for a, b in zip(c, c[1:]))
                         for c in found)
    assert not found, f"{len(found)} import cycle(s) in decoding/:\n{report}"


def test_guard_never_reaches_the_native_extension():
    """Statically, with function-level imports and parent packages: nothing that
    ``import decoding.guard`` may run imports decoding._native."""
    closure = runtime_closure(import_graph(), "decoding.guard")
    assert "decoding._native" not in closure, " -> ".join(chain(closure, "decoding._native"))
