"""Small LangGraph graphs shared by the LangGraph saver tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.graph import END, START, StateGraph


def looping(schema: type, node: Callable[[Any], dict[str, Any]], until: Callable[[Any], bool]) -> StateGraph:
    """A graph of one node that runs again until `until(state)` holds (one checkpoint per step)."""
    graph = StateGraph(schema)
    graph.add_node("node", node)
    graph.add_edge(START, "node")
    graph.add_conditional_edges("node", lambda s: END if until(s) else "node")
    return graph


def chain(schema: type, *nodes: tuple[str, Any]) -> StateGraph:
    """A graph running the (name, node) pairs one after the other, once."""
    graph = StateGraph(schema)
    previous = START
    for name, node in nodes:
        graph.add_node(name, node)
        graph.add_edge(previous, name)
        previous = name
    graph.add_edge(previous, END)
    return graph


def extend(state: list[Any], writes: list[list[Any]]) -> list[Any]:
    """A DeltaChannel reducer: the state and a batch of writes, each a list of items."""
    return state + [item for batch in writes for item in batch]
