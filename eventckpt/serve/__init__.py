"""`eventckpt serve`: a read-only time-travel viewer of a store in the browser.

Streams and their fork graphs, a stream's timeline, a version's state tree, events and diff, any two
versions compared, a path's history, and search, each page with a JSON twin. Built on the public API
of Store and CheckpointStore; every script and style ships in this package (nothing from a network).
"""

from .app import Response, Viewer
from .server import ViewerServer, run, serving

__all__ = ["Response", "Viewer", "ViewerServer", "run", "serving"]
