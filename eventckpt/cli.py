"""The `eventckpt` command line (also `python -m eventckpt`)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click
import orjson

import eventckpt
from eventckpt import ops

from .errors import EventCkptError


class _Group(click.Group):
    """Errors print one clear line and exit non-zero, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except EventCkptError as exc:
            raise click.ClickException(f"{type(exc).__name__}: {exc}") from None


@click.group(cls=_Group)
@click.version_option(eventckpt.__version__, prog_name="eventckpt")
def main() -> None:
    """eventckpt: an event-sourced checkpoint store in one SQLite file."""


def _short(value: Any, width: int = 60) -> str:
    text = orjson.dumps(value, default=repr).decode()
    return text if len(text) <= width else text[: width - 3] + "..."


@main.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--steps", default=8, show_default=True, help="How many agent steps to simulate.")
def demo(path: str, steps: int) -> None:
    """Run a short simulated agent on a single-file store and show its log, a time-travel restore and a diff.

    Example: eventckpt demo agent.db
    """
    with eventckpt.open(path) as store:
        store.delete_stream("demo", forks=True)
        task = store.stream("demo")
        task.save({"messages": [{"role": "user", "content": "Find the cheapest flight to Lisbon."}],
                   "plan": ["search flights"], "scratch": {"searches": 0}, "step": 0},
                  {"input_tokens": 0, "output_tokens": 0}, name="start", metadata={"node": "input"})
        for step in range(1, steps + 1):
            tool = step % 3 == 0
            with task.transaction(auto=not tool, name="before tool call" if tool else None,
                                  metadata={"node": "tools" if tool else "agent", "step": step}) as tx:
                tx.append("messages", {"role": "assistant", "content": f"Step {step}: "
                                       + ("calling search_flights(LIS)" if tool else "thinking about fares")})
                if tool:
                    tx.incr(("scratch", "searches"))
                    tx.set(("scratch", "best_fare"), 120 - step * 3)
                tx.set("step", step)
                tx.usage(input_tokens=120, output_tokens=40)
        task.save({**task.state(), "plan": ["search flights", "book flight"]}, metadata={"node": "planner"})

        click.echo(f"store {path}: stream 'demo', {task.version} versions\n")
        click.echo("log (newest first):")
        for version in reversed(task.list_versions()):
            cp = task.get(version)
            kind = "auto" if cp.auto else "manual"
            click.echo(f"  v{version:<3} {cp.created_at:%H:%M:%S.%f} {kind:6} {cp.name or '':16} "
                       f"node={cp.metadata.get('node', ''):8} tokens={cp.token_usage.get('input_tokens', 0)}")

        back = 3
        then = task.state(back)
        click.echo(f"\ntime travel to v{back}: step={then['step']}, {len(then['messages'])} messages, "
                   f"scratch={_short(then['scratch'])}")

        click.echo(f"\ndiff v{back} -> v{task.version}:")
        for event in ops.diff(then, task.state()):
            where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in event.path)
            click.echo(f"  {event.op:8} {where:24} {_short(event.value) if event.op != 'delete' else ''}")

        branch = task.fork(at=back, task_id="demo-retry")
        branch.save({**then, "plan": ["search trains"]}, metadata={"node": "replan"})
        click.echo(f"\nforked 'demo' at v{back} into '{branch.task_id}' (v{branch.version}); "
                   f"'demo' keeps all {task.version} versions")
    size = os.path.getsize(path)
    click.echo(f"\nfile: {path}, {size:,} bytes. Try: sqlite3 {path} \"SELECT version, op, path FROM events LIMIT 5\"")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
