"""Adapters: one per implementation under test, found by name, ``module:attr`` or ``.py`` path.

Registered names come from the entry-point group ``posenc.adapters`` (see pyproject.toml);
a third-party package adds its own adapter by declaring an entry point there -- no change to
the kit is needed.

The adapter author's façade (docs/architecture.md, "Public API"): :class:`Adapter` (the contract and
its defaults), :class:`Unsupported`, :func:`family_ports` (compose a port's per-family ``Ops`` mixins),
the generated :class:`ReferenceAdapter` and :class:`MutantAdapter` (the reference, and a divergence's
mutant: subclass them to plant a bug), and the loaders.  A model adapter's contract is
:mod:`posenc.adapters.model`.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from importlib.metadata import entry_points
from pathlib import Path

from posenc.spec.errors import UsageError, exception_text

from .base import Adapter, RopeOp, Unsupported, family_ports, for_rotation, forms_unsupported, positive_rotation_only  # noqa: F401
from .reference_adapter import MutantAdapter, ReferenceAdapter

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


def _instantiate(obj, where: str, base: type = Adapter):
    if isinstance(obj, type) or (callable(obj) and not isinstance(obj, base)):
        obj = _import(f"{where}: constructing the adapter raised", obj)
    if not isinstance(obj, base):
        what = "posenc.adapters.Adapter" if base is Adapter else f"{base.__module__}.{base.__name__}"
        raise UsageError(f"{where} is not a {what} (got {type(obj).__name__})")
    return obj


def load_model_adapter(spec: str):
    """Load a model adapter (:class:`posenc.adapters.model.ModelAdapter`): ``hf:<model_type>`` (a
    tiny transformers model of that architecture, :mod:`posenc.adapters.hf_model`), a
    ``path/to/config.json`` (a tiny model of that config's architecture with its positional
    parameters), ``package.module:attr`` or ``path/to/file.py[:attr]`` (a file without ``:attr``
    defines ``MODEL``).  Raises :class:`UsageError` for anything else."""
    from .model import ModelAdapter
    if spec.startswith("hf:"):
        try:
            from .hf_model import HFModelAdapter, architectures
        except ImportError as e:
            raise UsageError(f"--model {spec!r} needs transformers and torch: {e}; pip install -e '.[hf]'") from None
        arch = spec[3:]
        if arch not in architectures():
            raise UsageError(f"--model {spec!r}: no tiny configuration of {arch!r}; the hf: architectures are "
                             f"{', '.join('hf:' + a for a in architectures())}")
        return HFModelAdapter(arch)
    if spec.endswith(".json"):  # a config.json: a tiny model of its architecture and positional parameters
        if not Path(spec).is_file():
            raise UsageError(f"--model {spec!r}: file does not exist")
        try:
            from .hf_model import from_config_file
        except ImportError as e:
            raise UsageError(f"--model {spec!r} needs transformers and torch: {e}; pip install -e '.[hf]'") from None
        try:
            return from_config_file(spec)
        except (ValueError, OSError) as e:  # json.JSONDecodeError is a ValueError
            raise UsageError(f"--model {spec!r}: {e}") from None
    if spec.endswith(".py") or ".py:" in spec or ":" in spec:
        return _load(spec, ModelAdapter, "--model", "MODEL")
    raise UsageError(f"unknown model {spec!r}: pass hf:<model_type> (a tiny transformers model), "
                     "package.module:attr or a path to a .py file")


def load_adapter(spec: str) -> Adapter:
    """Load an adapter from a registered name, ``package.module:attr`` or ``path/to/file.py[:attr]``.

    A ``.py`` file without ``:attr`` must define ``ADAPTER`` (an instance, class or factory).
    Raises :class:`UsageError` naming the available adapters for an unknown name.
    """
    regs = registered()
    if spec not in regs and (spec.endswith(".py") or ".py:" in spec or ":" in spec):
        return _load(spec, Adapter, "--adapter", "ADAPTER")
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
    raise UsageError(
        f"unknown adapter {spec!r}; registered adapters: {', '.join(sorted(regs)) or '(none)'}; "
        "or pass package.module:attr or a path to a .py file"
    )


def _load(spec: str, base: type, option: str, default_attr: str):
    """An adapter from ``path/to/file.py[:attr]`` (default ``default_attr``) or ``package.module:attr``."""
    path_part, _, attr = spec.partition(".py")
    if spec.endswith(".py") or ".py:" in spec:
        path = Path(path_part + ".py")
        attr = attr.lstrip(":") or default_attr
        if not path.is_file():
            raise UsageError(f"{option} {spec!r}: file {path} does not exist")
        folder = str(path.resolve().parent)  # its own modules beside it import, as a script's do
        if folder not in sys.path:
            sys.path.insert(0, folder)
        modspec = importlib.util.spec_from_file_location(f"posenc_user_adapter_{path.stem}", path)
        module = importlib.util.module_from_spec(modspec)
        _import(f"{option} {spec!r}: importing {path} raised", lambda: modspec.loader.exec_module(module))
        if not hasattr(module, attr):
            raise UsageError(f"{option} {spec!r}: {path} defines no {attr!r}")
        return _instantiate(getattr(module, attr), f"{path}:{attr}", base)
    mod, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(mod)
    except ImportError as e:
        raise UsageError(f"{option} {spec!r}: cannot import {mod!r}: {e} (is it installed or on PYTHONPATH?)") from None
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, KeyboardInterrupt):  # the user's Ctrl-C; anything else the adapter raises is reported
            raise
        raise UsageError(f"{option} {spec!r}: importing {mod!r} raised {_cause(e)}") from None
    if not hasattr(module, attr):
        raise UsageError(f"{option} {spec!r}: module {mod} has no attribute {attr!r}")
    return _instantiate(getattr(module, attr), spec, base)


#: The kit's framework adapters an adapter author may subclass (their array glue and the kit's ports),
#: imported on first use: importing posenc.adapters imports no framework.
_FRAMEWORK_BASES = {"TorchAdapter": "posenc.adapters.torch_adapter", "JaxAdapter": "posenc.adapters.jax_adapter",
                    "TFAdapter": "posenc.adapters.tf_adapter"}


def __getattr__(name: str):
    if name in _FRAMEWORK_BASES:
        return getattr(importlib.import_module(_FRAMEWORK_BASES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Adapter", "RopeOp", "Unsupported", "family_ports", "ReferenceAdapter", "MutantAdapter", "load_adapter",
           "load_model_adapter", "registered", "ENTRY_POINT_GROUP", *_FRAMEWORK_BASES]
