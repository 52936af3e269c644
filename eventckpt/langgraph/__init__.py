"""A LangGraph checkpointer on eventckpt (install with `pip install 'eventckpt[langgraph]'`).

    from eventckpt.langgraph import EventCkptSaver

    with EventCkptSaver("agent.db") as saver:
        graph = builder.compile(checkpointer=saver)
"""

try:
    from .saver import EventCkptSaver
except ModuleNotFoundError as exc:  # pragma: no cover - exercised only without the extra
    if exc.name and exc.name.split(".")[0] in ("langgraph", "langchain_core", "ormsgpack"):
        raise ModuleNotFoundError(
            "eventckpt.langgraph needs LangGraph: pip install 'eventckpt[langgraph]'", name=exc.name
        ) from exc
    raise

__all__ = ["EventCkptSaver"]
