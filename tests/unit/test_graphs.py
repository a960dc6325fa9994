"""Graphs (ADR 073): the one owner of their validation and storing order, and of chains, groups and chords."""

from __future__ import annotations

import pytest

from alkstore import DependencyCycle, EnqueueOpts, Graph, InvalidOptions, chain, chord, group
from alkstore.rules._graphs import plan_graph


def one(key: str) -> Graph:
    graph = Graph()
    graph.add(key, "q", key)
    return graph


def test_a_graph_is_stored_parents_first_each_naming_its_parents_positions() -> None:
    graph = Graph()
    graph.add("report", "q", after=["email", "invoice", 7])
    graph.add("email", "q", after=["charge"])
    graph.add("invoice", "q", after=["charge"])
    graph.add("charge", "q")
    planned = plan_graph(graph.nodes)
    assert [item.node.key for item in planned] == ["charge", "email", "invoice", "report"]
    assert [item.after_batch for item in planned] == [(), (0,), (0,), (1, 2)]
    assert planned[3].node.after_ids == (7,)


def test_a_circle_is_named_and_a_missing_key_refused() -> None:
    graph = Graph()
    graph.add("free", "q")
    graph.add("a", "q", after=["b", "free"])
    graph.add("b", "q", after=["a"])
    with pytest.raises(DependencyCycle, match=r"a -> b -> a"):
        plan_graph(graph.nodes)
    missing = Graph()
    missing.add("a", "q", after=["b"])
    with pytest.raises(InvalidOptions, match="'b'"):
        plan_graph(missing.nodes)


def test_a_node_takes_ids_from_its_opts_too_but_not_an_ordering_key_with_parents() -> None:
    graph = Graph()
    graph.add("a", "q", opts=EnqueueOpts(after=[3], on_parent_failure="die"), after=[4])
    (node,) = graph.nodes
    assert (node.after_ids, node.on_parent_failure, node.opts.after) == ((3, 4), "die", ())
    keyed = Graph()
    keyed.add("a", "q")
    keyed.add("b", "q", None, EnqueueOpts(ordering_key="k"), after=["a"])
    with pytest.raises(InvalidOptions, match="not both"):
        plan_graph(keyed.nodes)


def test_a_chain_links_each_steps_first_jobs_to_the_last_jobs_of_the_step_before() -> None:
    pipeline = chain(one("charge"), chord(group(one("email"), one("invoice")), one("report")))
    after = {node.key: node.after_keys for node in pipeline.nodes}
    assert after == {
        "0.charge": (),
        "1.0.0.email": ("0.charge",),
        "1.0.1.invoice": ("0.charge",),
        "1.1.report": ("1.0.0.email", "1.0.1.invoice"),
    }
    assert [node.key for node in group(one("a"), one("b")).nodes] == ["0.a", "1.b"]
    assert all(not node.after_keys for node in group(one("a"), one("b")).nodes)
