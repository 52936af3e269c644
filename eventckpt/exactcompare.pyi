from collections.abc import Callable
from typing import Any

def same(stored: Any, caller: Any, fallback: Callable[[Any, Any], bool], /) -> bool: ...
