"""Workload W (DESIGN.md): an agent loop, generated deterministically so every system saves the same data.

Each step appends one message of about 400 bytes to `messages`, adds 120/40 to the input/output token
counters, sets `step`, and changes 2 of the 20 keys in `scratch`.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

WORDS = (
    "the agent reads the file then calls a tool to search for the answer and writes a short summary "
    "of what it found before planning the next step with care"
).split()
SCRATCH_KEYS = [f"k{i:02d}" for i in range(20)]


@dataclass(frozen=True, slots=True)
class Step:
    step: int
    message: dict[str, Any]
    scratch: dict[str, str]  # the two changed keys and their new values
    input_tokens: int
    output_tokens: int


def steps(n: int, seed: int = 7) -> Iterator[Step]:
    rng = random.Random(seed)
    for i in range(1, n + 1):
        text = " ".join(rng.choice(WORDS) for _ in range(70))[:360]
        message = {"role": "assistant" if i % 2 else "user", "content": text, "id": f"msg-{i:06d}"}
        keys = rng.sample(SCRATCH_KEYS, 2)
        scratch = {k: f"{k}-value-at-step-{i}-{rng.randrange(10**6):06d}" for k in keys}
        yield Step(i, message, scratch, 120 * i, 40 * i)


def initial_scratch() -> dict[str, str]:
    return {k: f"{k}-initial" for k in SCRATCH_KEYS}


def event_rows(s: Step) -> list[tuple[str, str, str]]:
    """The (op, path, JSON value) rows one step writes in eventckpt's journal (and in the bare limit)."""
    rows = [("append", "$.messages", orjson.dumps(s.message).decode()), ("set", "$.step", str(s.step))]
    rows += [("set", f"$.scratch.{k}", orjson.dumps(v).decode()) for k, v in s.scratch.items()]
    return rows


def payload_bytes(s: Step) -> int:
    """The bytes of one step's JSON payload: what any store must at least keep."""
    return sum(len(value) for _, _, value in event_rows(s))
