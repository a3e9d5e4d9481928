"""The worker process never outlives the run (:mod:`posenc.conformance.isolation`).

Three ways the run can end without its ``atexit`` hooks, and what ends the worker then:

- **SIGTERM or SIGHUP to pytest** (``timeout``, a CI runner, a scheduler, a closed terminal):
  :func:`install` puts a handler in front of the default action that kills every live worker's
  process group (the adapter's own children with it) and removes its spill folder and log, passes
  the signal on to pytest's children (pytest-xdist's workers, which do the same), then
  lets the signal do what it did before (the default action: pytest dies of it, exit status
  128 + N; a handler someone else installed is called).  A signal that was ignored (``nohup``)
  stays ignored.
- **SIGKILL to pytest** (or any death): each worker forks a *guard* at start-up
  (:func:`guard`, in the worker's process group) that blocks reading a pipe only pytest holds
  open for writing; at end of file -- pytest is gone, however it died -- the guard kills the
  worker, removes the spill folder and the log, and kills the worker's process group (itself
  included).  It needs no Python in the worker to run, so a hang in C code holding the GIL is
  ended too.
- **Leftovers of a run that died anyway** (a machine that lost power, a guard killed by hand):
  spill folders and logs are named after the pytest process's ID; :func:`sweep` removes those
  of processes that no longer exist when the next run starts a worker.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import time
import weakref
from typing import Callable, Optional

#: The signals a run is ended with from outside, beside Ctrl-C (pytest's own KeyboardInterrupt).
SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))

_LIVE: "weakref.WeakSet" = weakref.WeakSet()
_PREVIOUS: dict[int, object] = {}


def install(worker) -> None:
    """Register ``worker`` (its ``abandon()`` kills its process group and removes its files) and
    put the SIGTERM / SIGHUP handler in place (once; only from the main thread)."""
    _LIVE.add(worker)
    for sig in SIGNALS:
        if sig in _PREVIOUS:
            continue
        try:
            prev = signal.getsignal(sig)
            if prev == signal.SIG_IGN or prev is None:  # ignored (nohup) or set outside Python: left alone
                continue
            signal.signal(sig, _on_signal)
        except (ValueError, OSError):  # not the main thread: the guard still ends the worker
            continue
        _PREVIOUS[sig] = prev


def uninstall(worker) -> None:
    """``worker`` was closed; the last one closed restores the handlers that were there before."""
    _LIVE.discard(worker)
    if len(_LIVE):
        return
    for sig, prev in list(_PREVIOUS.items()):
        try:
            if signal.getsignal(sig) is _on_signal:
                signal.signal(sig, prev)
        except (ValueError, OSError):
            continue
        del _PREVIOUS[sig]


def _on_signal(signum, frame) -> None:
    prev = _PREVIOUS.get(signum, signal.SIG_DFL)  # before abandon(): the last worker closed restores them all
    for w in list(_LIVE):
        try:
            w.abandon()
        except Exception:  # noqa: BLE001, S110 - the others and the signal's own action still follow
            pass
    for pid in _children():  # pytest-xdist's workers (a controller's children): ended now, each by its own
        try:  # handler (its adapter's worker with it), not when they notice the controller is gone
            os.kill(pid, signum)
        except OSError:
            pass
    _PREVIOUS.pop(signum, None)
    signal.signal(signum, prev if prev is not None else signal.SIG_DFL)
    if callable(prev):
        prev(signum, frame)
        return
    os.kill(os.getpid(), signum)  # the default action: this process ends of the signal


def _children() -> list[int]:
    """The IDs of this process's live children (Linux's /proc; none elsewhere)."""
    me, out = os.getpid(), []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(me):
            out.append(int(stat.split("/")[2]))
    return out


def owned_name(kind: str) -> str:
    """The prefix of a spill folder or log of this process (``posenc-arrays-<pid>-``), found again
    by :func:`sweep` once this process is gone."""
    return f"posenc-{kind}-{os.getpid()}-"


def sweep(folder: str, kind: str) -> None:
    """Remove the spill folders / logs in ``folder`` of pytest processes that no longer exist."""
    pattern = re.compile(rf"posenc-{kind}-(\d+)-")
    for path in glob.glob(os.path.join(folder, f"posenc-{kind}-*")):
        m = pattern.match(os.path.basename(path))
        if m is None or _exists(int(m.group(1))):
            continue
        try:
            if os.stat(path).st_uid != os.getuid():
                continue
        except OSError:
            continue
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            remove_quietly(path)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it exists
        return True
    return True


def remove_quietly(path: Optional[str]) -> None:
    """Remove the file at ``path`` (if any), whatever is in the way (gone already, no permission)."""
    if path:
        try:
            os.unlink(path)
        except OSError:
            pass


def guard(watch_fd: int, spill: Optional[str], log: Optional[str], fork: Optional[Callable[[], int]] = None) -> None:
    """In the worker, before anything else: fork the guard (see the module docstring).  The guard
    closes every other file (it never holds the protocol pipes) and waits for end of file on
    ``watch_fd``, whose write end only pytest holds.  Without ``os.fork`` (not POSIX): no guard."""
    fork = fork or getattr(os, "fork", None)
    worker = os.getpid()
    if fork is None or fork() != 0:
        os.close(watch_fd)  # the worker itself never reads it
        return
    try:
        os.closerange(0, watch_fd)
        os.closerange(watch_fd + 1, 1 << 16)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        while True:
            try:
                if not os.read(watch_fd, 1):
                    break
            except InterruptedError:
                continue
            except OSError:
                break
    finally:
        try:
            os.kill(worker, signal.SIGKILL)
        except OSError:
            pass
        if spill:
            shutil.rmtree(spill, ignore_errors=True)
        remove_quietly(log)
        try:
            os.killpg(0, signal.SIGKILL)  # whatever the adapter started, and this guard
        finally:
            os._exit(0)


#: How long :func:`keep_priority` retries a write the kernel's rate limit refused (parallel runs start their
#: workers together: ``posenc matrix --jobs N``, pytest-xdist).
AUTOGROUP_RETRY_S = 1.0


def keep_priority(pid: int) -> None:
    """Give the worker ``pid``'s scheduling group this process's nice value.

    The worker leads a session of its own (``start_new_session``: its process group is killed whole).  Under
    Linux's autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``, on by default in many kernels)
    every session is a scheduling group, weighted by the group's nice value (0), not by its processes': a run
    started with ``nice -n 19`` (say ``posenc matrix`` beside other work) would hand its adapter's work
    back to full priority, half the CPUs against every other session.  The group's nice is written to
    ``/proc/PID/autogroup`` (proc(5)); best effort: no autogroup or no permission leave it as it is, a write the
    kernel's rate limit refuses (EAGAIN) is retried for :data:`AUTOGROUP_RETRY_S`, and a run at nice 0 or below
    changes nothing."""
    try:
        nice = os.getpriority(os.PRIO_PROCESS, 0)
    except (AttributeError, OSError):  # not POSIX
        return
    if nice <= 0:
        return
    end = time.monotonic() + AUTOGROUP_RETRY_S
    while True:
        try:
            with open(f"/proc/{pid}/autogroup", "w") as f:
                f.write(str(nice))
            return
        except BlockingIOError:  # EAGAIN: without CAP_SYS_ADMIN, one write per 100 ms on the whole machine
            if time.monotonic() > end:
                return
            time.sleep(0.02)
        except OSError:
            return
