"""What stopped a run, said alike in a serial run and under pytest-xdist.

A KeyboardInterrupt -- the user's Ctrl-C, or one the adapter raised itself
(:class:`~posenc.conformance.isolation.AdapterInterrupt`: the worker ignores SIGINT, so it is the
adapter's) -- stops the run: the test it interrupted gets no verdict, the report is incomplete, the
exit status is pytest's INTERRUPTED.  :class:`StopWatch` (registered in the pytest process and in
each pytest-xdist worker) records it with the test it interrupted; an xdist worker hands it to the
controller with its ``workeroutput`` (:data:`INTERRUPT_KEY`), whose ``Booker`` books no crash for the
interrupted test (pytest-xdist reports the stopped worker as crashed inside it), so the summary line
(:func:`interrupted_line`), the report and the exit status are those of a serial run.
"""

from __future__ import annotations

from typing import Optional

import pytest

from posenc.spec.errors import exception_text

#: ``workeroutput`` key of a pytest-xdist worker's interrupt.
INTERRUPT_KEY = "posenc_interrupt"


class StopWatch:
    def __init__(self, st, config):
        self.st, self.config = st, config
        self.running: Optional[str] = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid, location):
        self.running = nodeid

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid, location):
        self.running = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo):
        if self.st.interrupted:  # the controller's own Interrupted after a worker's: the worker's said it
            return
        e = excinfo.value
        try:
            msg = exception_text(e)
        except BaseException:  # noqa: BLE001 - never lose the interrupt over its text
            msg = ""
        said = "KeyboardInterrupt" + (f" ({msg})" if msg else "")
        self.st.interrupted = said + (f" in {self.running}" if self.running else "")
        out = getattr(self.config, "workeroutput", None)
        if out is not None:  # a pytest-xdist worker: the controller says it
            out[INTERRUPT_KEY] = self.st.interrupted


def interrupted_line(st) -> Optional[str]:
    """The summary's line naming what stopped the run, or None."""
    return f"posenc: the run was stopped by a {st.interrupted}" if st.interrupted else None


def node_interrupted(report) -> bool:
    """``report`` is pytest-xdist's crash report of a worker that stopped on a KeyboardInterrupt."""
    out = getattr(getattr(report, "node", None), "workeroutput", None) or {}
    return out.get("exitstatus") == pytest.ExitCode.INTERRUPTED or INTERRUPT_KEY in out
