"""PyIceberg's PyArrow FileIO, reading `file:` locations the way Iceberg's Java side writes them.

Iceberg (Hadoop's `Path`) builds a local table's locations by appending to the warehouse text and takes
everything after `file:` as the literal path, so a home directory holding `#` or `?` ends up in the
metadata as `file:///home/ice#pack?v=1/...`. PyArrowFileIO parses locations as URLs, which cuts such a
path at the `#` or `?`, so PyIceberg would look for a different file than Spark wrote. This FileIO
takes the path of a `file:` location literally, as Iceberg does; every other location (s3://, ...)
is parsed by PyArrowFileIO unchanged.
"""

from __future__ import annotations

from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.typedef import EMPTY_DICT, Properties

_FILE = "file:"


class LiteralLocalFileIO(PyArrowFileIO):
    """PyArrowFileIO whose `file:` locations (`file:/p`, `file:///p`) are literal local paths."""

    @staticmethod
    def parse_location(location: str, properties: Properties = EMPTY_DICT) -> tuple[str, str, str]:
        if location[: len(_FILE)].lower() == _FILE:
            path = location[len(_FILE) :]
            if path.startswith("//"):  # file:///p has an empty authority; file://host/p is not local
                authority, _, rest = path[2:].partition("/")
                if not authority:
                    return "file", "", "/" + rest
            else:
                return "file", "", path
        return PyArrowFileIO.parse_location(location, properties)
