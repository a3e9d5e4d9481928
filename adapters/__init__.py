"""Adapters: one per implementation under test, found by name, ``module:attr`` or ``.py`` path.

Registered names come from the entry-point group ``posenc.adapters`` (see pyproject.toml);
a third-party package adds its own adapter by declaring an entry point there -- no change to
the kit is needed.
"""

from __future__ import annotations

import importlib
import importlib.util
from importlib.metadata import entry_points
from pathlib import Path

from posenc.spec.errors import UsageError, exception_text

from .base import Adapter, RopeOp, Unsupported, for_rotation, positive_rotation_only

ENTRY_POINT_GROUP = "posenc.adapters"


def registered() -> dict[str, str]:
    """``{name: 'module:attr'}`` of the adapters registered by entry point."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _cause(e: BaseException) -> str:
    """``Type: message (file:line)`` of an exception, on one line."""
    import traceback
    tb = traceback.extract_tb(e.__traceback__)
    where = f" ({tb[-1].filename}:{tb[-1].lineno})" if tb else ""
    if isinstance(e, SyntaxError) and e.filename:
        where = f" ({e.filename}:{e.lineno})"
    return f"{type(e).__name__}: {exception_text(e)}{where}".replace("\n", " ")


def _import(what: str, fn):
    """Run an import (of a module or an adapter file); any exception becomes a one-line UsageError."""
    try:
        return fn()
    except UsageError:
        raise
    except BaseException as e:  # noqa: BLE001 - a broken adapter file is a usage error with its cause
        if isinstance(e, KeyboardInterrupt):  # the user's Ctrl-C; anything else the adapter raises is reported
            raise
        raise UsageError(f"{what} {_cause(e)}") from None


def _instantiate(obj, where: str) -> Adapter:
    if isinstance(obj, type) or (callable(obj) and not isinstance(obj, Adapter)):
        obj = _import(f"{where}: constructing the adapter raised", obj)
    if not isinstance(obj, Adapter):
        raise UsageError(f"{where} is not a posenc.adapters.Adapter (got {type(obj).__name__})")
    return obj


def load_adapter(spec: str) -> Adapter:
    """Load an adapter from a registered name, ``package.module:attr`` or ``path/to/file.py[:attr]``.

    A ``.py`` file without ``:attr`` must define ``ADAPTER`` (an instance, class or factory).
    Raises :class:`UsageError` naming the available adapters for an unknown name.
    """
    regs = registered()
    if spec in regs:
        target = regs[spec]
        mod, _, attr = target.partition(":")
        try:
            module = importlib.import_module(mod)
        except ImportError as e:
            raise UsageError(f"adapter {spec!r} ({target}) cannot be imported: {e}; install what it wraps "
                             "(e.g. pip install -e '.[hf]' for hf-transformers)") from None
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, KeyboardInterrupt):  # the user's Ctrl-C; anything else the adapter raises is reported
                raise
            raise UsageError(f"adapter {spec!r} ({target}): importing it raised {_cause(e)}") from None
        return _instantiate(getattr(module, attr), f"adapter {spec!r} ({target})")
    path_part, _, attr = spec.partition(".py")
    if spec.endswith(".py") or ".py:" in spec:
        path = Path(path_part + ".py")
        attr = attr.lstrip(":") or "ADAPTER"
        if not path.is_file():
            raise UsageError(f"--adapter {spec!r}: file {path} does not exist")
        modspec = importlib.util.spec_from_file_location(f"posenc_user_adapter_{path.stem}", path)
        module = importlib.util.module_from_spec(modspec)
        _import(f"--adapter {spec!r}: importing {path} raised", lambda: modspec.loader.exec_module(module))
        if not hasattr(module, attr):
            raise UsageError(f"--adapter {spec!r}: {path} defines no {attr!r}")
        return _instantiate(getattr(module, attr), f"{path}:{attr}")
    if ":" in spec:
        mod, _, attr = spec.partition(":")
        try:
            module = importlib.import_module(mod)
        except ImportError as e:
            raise UsageError(f"--adapter {spec!r}: cannot import {mod!r}: {e} (is it installed or on PYTHONPATH?)") from None
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, KeyboardInterrupt):  # the user's Ctrl-C; anything else the adapter raises is reported
                raise
            raise UsageError(f"--adapter {spec!r}: importing {mod!r} raised {_cause(e)}") from None
        if not hasattr(module, attr):
            raise UsageError(f"--adapter {spec!r}: module {mod} has no attribute {attr!r}")
        return _instantiate(getattr(module, attr), spec)
    raise UsageError(
        f"unknown adapter {spec!r}; registered adapters: {', '.join(sorted(regs)) or '(none)'}; "
        "or pass package.module:attr or a path to a .py file"
    )


__all__ = ["Adapter", "RopeOp", "Unsupported", "load_adapter", "registered", "ENTRY_POINT_GROUP"]
