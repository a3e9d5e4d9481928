"""The run's crashes of the adapter's process (:mod:`posenc.conformance.isolation`): its crash credits.

A serial run keeps them in its own process.  Under pytest-xdist every xdist worker runs the adapter
in a worker process of its own, and the credits are the run's, not each xdist worker's: the
controller names a ledger file (``workerinput["posenc_crashes"]``) that every xdist worker appends
its crashes to, so the third crash anywhere ends the restarts everywhere, a crash's number counts
every worker's, and the controller's summary reads them all.
"""

from __future__ import annotations

import os
import tempfile
from typing import Optional

#: ``workerinput`` key of the ledger file under pytest-xdist.
LEDGER_KEY = "posenc_crashes"


class Crashes:
    """``"<test ID>: <what happened>"`` per crash, in order: this process's, or the ledger's."""

    def __init__(self, ledger: Optional[str] = None):
        self.ledger = ledger
        self._own: list[str] = []

    def append(self, text: str) -> None:
        line = " ".join(text.split())
        self._own.append(line)
        if self.ledger:
            fd = os.open(self.ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, (line + "\n").encode())  # one write of O_APPEND: never interleaved
            finally:
                os.close(fd)

    def all(self) -> list[str]:
        if not self.ledger:
            return list(self._own)
        try:
            with open(self.ledger, encoding="utf-8", errors="replace") as f:
                return [ln.rstrip("\n") for ln in f if ln.strip()]
        except OSError:
            return list(self._own)

    def __len__(self) -> int:
        return len(self.all())

    def __getitem__(self, i):
        return self.all()[i]

    def __iter__(self):
        return iter(self.all())


def new_ledger() -> str:
    """The controller's ledger file (empty), removed by :func:`drop_ledger` (or, when the controller
    was killed, swept by the next run: its name carries the controller's process ID)."""
    from posenc.conformance.reaping import owned_name, sweep
    sweep(tempfile.gettempdir(), "crashes")
    fd, path = tempfile.mkstemp(prefix=owned_name("crashes"), suffix=".txt")
    os.close(fd)
    return path


def drop_ledger(path: Optional[str]) -> None:
    from posenc.conformance.reaping import remove_quietly
    remove_quietly(path)
