"""What a capture yields: frames of one TCP connection direction, with capture times."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from ..batch import FrameBatch, parts_of

CLIENT_TO_SERVER = "client->server"
SERVER_TO_CLIENT = "server->client"


class Connection(NamedTuple):
    """One direction of a TCP connection: who sends, who receives, and which way it flows."""

    src: str
    src_port: int
    dst: str
    dst_port: int
    #: "client->server" when ``dst_port`` is one of the DCP ports asked for, else
    #: "server->client".
    direction: str


class CaptureBatch(FrameBatch):
    """A ``FrameBatch`` of one connection direction, with per-frame capture timestamps.

    Offsets are positions in that direction's TCP byte stream (0 is the byte after the
    SYN, or the first byte captured when the capture started mid-connection).
    ``errors`` also lists capture gaps (bytes missing from the capture) and the bytes
    of frames they cut.
    """

    def __init__(self, batch: FrameBatch, connection: Connection, timestamps: np.ndarray):
        super().__init__(**parts_of(batch))
        #: The connection direction every frame of this batch travelled.
        self.connection = connection
        #: Capture time of the packet holding each frame's last byte (int64 ns since
        #: the epoch; 0 for pcapng simple packet blocks, which carry no time).
        self.timestamps = timestamps

    def __repr__(self):
        c = self.connection
        return (f"<CaptureBatch {c.src}:{c.src_port} -> {c.dst}:{c.dst_port} ({c.direction}), "
                f"{len(self)} frames, bytes {self.base_offset + self.start}.."
                f"{self.base_offset + self.consumed}, {len(self.errors)} skipped regions>")

    def filter(self, mask) -> CaptureBatch:
        """The frames selected by a boolean mask or an index array, with their timestamps."""
        return CaptureBatch(super().filter(mask), self.connection,
                            self.timestamps[np.asarray(mask)])

    def to_arrow(self, *, binary_view: bool = False) -> pa.Table:
        """``FrameBatch.to_arrow`` plus ``timestamp`` (ns, UTC) and the connection columns."""
        table = super().to_arrow(binary_view=binary_view)
        n, c = len(self), self.connection
        zeros = pa.array(np.zeros(n, np.int32))
        table = table.append_column("timestamp", pa.array(self.timestamps,
                                                          pa.timestamp("ns", "UTC")))
        for name, text in (("src", c.src), ("dst", c.dst), ("direction", c.direction)):
            table = table.append_column(name, pa.DictionaryArray.from_arrays(
                zeros, pa.array([text])))
        for name, port in (("src_port", c.src_port), ("dst_port", c.dst_port)):
            table = table.append_column(name, pa.array(np.full(n, port, np.uint16)))
        return table
