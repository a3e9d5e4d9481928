"""The harness's side of an adapter that runs in another process.

The suite runs the adapter under test in a worker process (:mod:`posenc.conformance.isolation`) and
hands the harness a proxy of it.  The harness never imports the suite: the proxy and its handles
derive from the marker classes here, and the harness routes a call through the proxy's fused
requests (``posenc_run_op``, ``posenc_natives``, ``posenc_changed``, ``posenc_facts``) where
:func:`is_remote` says so.
"""

from __future__ import annotations

from typing import Optional


class Remote:
    """Base of a proxy of an adapter in its worker process (``isolation.RemoteAdapter``)."""

    __slots__ = ()


class RemoteHandle:
    """Base of a handle on an object the worker holds (a native array, a prepared operation):
    ``remote_types`` names its type and bases there."""

    __slots__ = ()


class RemoteValue:
    """Base of what came back from the worker that is not plain data: only its type's names
    (``remote_types``)."""

    __slots__ = ()


class RemoteFailure:
    """Mixin of the exceptions rebuilt from the worker: the original type's name and message,
    and where it was raised (``remote_where``: file, line, function)."""

    remote_message: str = ""
    remote_where: Optional[tuple] = None

    def __str__(self) -> str:
        return self.remote_message


class RemoteCrash(Exception):
    """Base of the error the suite raises when the adapter's worker process died or was ended
    during a call (``isolation.AdapterCrashed``): the call cannot be retried -- a replay would
    crash again, and each crash costs one of the run's crash credits.  ``summary``: what happened
    in one line (exit status or signal, operation, crash number), without the worker's output."""

    summary: str = ""


def is_remote(adapter) -> bool:
    """``adapter`` is the proxy of an adapter running in its worker process."""
    return isinstance(adapter, Remote)


def class_names(cls: type) -> list[str]:
    """``module.qualname`` of ``cls`` and its bases (how a handle's type travels between the processes)."""
    return [f"{c.__module__}.{c.__qualname__}" for c in cls.__mro__]


def type_names(x) -> list[str]:
    """``module.qualname`` of ``x``'s type and bases, for a local or a remote object (the contract
    checks compare types by name, so they read the same on both sides of the process boundary)."""
    t = getattr(x, "remote_types", None) if isinstance(x, (RemoteHandle, RemoteValue)) else None
    return list(t) if t else class_names(type(x))
