"""The adapter's worker process: ``python -m posenc.conformance.worker`` (started by
:mod:`posenc.conformance.isolation`, never by hand).

It loads the adapter (``load_adapter`` of the ``--adapter`` value) and serves the plugin's
requests on its stdin / stdout (:mod:`posenc.conformance.wire` frames; the adapter's own prints go
to the log file that was its stderr): attribute reads, method calls, the private input copies and
their snapshots, and the per-output facts the contract checks need.  Everything the adapter
returns that is not plain data stays here as a handle.  SIGINT is ignored (the plugin owns the
user's Ctrl-C and ends this process; a KeyboardInterrupt the adapter raises itself goes back as
``interrupt`` and stops the run); end of input ends it.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import numpy as np

from posenc.conformance import wire
from posenc.harness.remote import class_names


class Worker:
    def __init__(self, proto_in, proto_out):
        self.inp, self.out = proto_in, proto_out
        self.objects: dict[int, Any] = {}
        self.snapshots: dict[int, tuple[str, np.ndarray]] = {}
        self.next_id = 1
        self.adapter = None
        self.cache: dict[int, Any] = {}  # immutable arrays and frozen parameters the plugin sent once
        self.method_names: dict[type, list[str]] = {}

    # ---- values -------------------------------------------------------------------------
    def _handle(self, obj) -> dict:
        k = self.next_id
        self.next_id += 1
        self.objects[k] = obj
        return {"$h": k, "mro": class_names(type(obj)), "call": callable(obj), "methods": self._methods(type(obj))}

    def _methods(self, cls: type) -> list[str]:
        """The public methods a prepared object's class defines (sent with its handle, so that
        looking one up needs no request); none for a class with many (a framework's array).  A
        class attribute that raises when read is left to the request that reads it."""
        if cls not in self.method_names:
            names = []
            try:
                for n in dir(cls):
                    try:
                        if not n.startswith("_") and callable(getattr(cls, n, None)):
                            names.append(n)
                    except BaseException:  # noqa: BLE001 - a descriptor that raises on the class
                        pass
            except BaseException:  # noqa: BLE001 - a metaclass whose __dir__ raises
                names = []
            self.method_names[cls] = names if len(names) <= 64 else []
        return self.method_names[cls]

    def _out(self, value, blobs, by_value: bool = False):
        if not by_value and isinstance(value, np.ndarray):
            return self._handle(value)  # an adapter's output array stays here, like any native array
        if not by_value:
            if isinstance(value, tuple):
                return wire.tuple_data(value, [self._out(v, blobs) for v in value])
            if isinstance(value, list):
                return [self._out(v, blobs) for v in value]
        return wire.encode(value, blobs, self._handle)

    def _in(self, data, blobs):
        def handle(d):
            if d["$h"] == 0:
                return self.adapter
            try:
                return self.objects[d["$h"]]
            except KeyError:
                raise LookupError(f"handle {d['$h']} is not (or no longer) held by the adapter's process") from None
        return wire.decode(data, blobs, handle)

    # ---- requests -----------------------------------------------------------------------
    def serve(self) -> None:
        pid = os.getpid()
        while True:
            try:
                req, blobs = wire.read_frame(self.inp)
            except EOFError:
                return
            for k in req.get("release", ()):
                self.objects.pop(k, None)
                self.snapshots.pop(k, None)
            out_blobs: list[bytes] = []
            try:
                result = getattr(self, "op_" + req["op"])(req, blobs, out_blobs)
                reply = {"ok": result}
            except BaseException as e:  # noqa: BLE001 - everything the adapter raises goes back to the plugin
                out_blobs = []
                # SIGINT is ignored here, so a KeyboardInterrupt is the adapter's own: the plugin
                # raises it too (the run stops, as it would with the adapter in its process)
                try:
                    data = wire.exception_data(e)
                except BaseException:  # noqa: BLE001 - exception_data guards each part; never lose the worker
                    data = {"mro": [["builtins", "Exception"]], "msg": "<an exception that could not be described>",
                            "where": None, "reason": None, "outcome_msg": None}
                reply = {"interrupt" if isinstance(e, KeyboardInterrupt) else "err": data}
            if os.getpid() != pid:  # a child the adapter forked returned here: only the worker replies
                os._exit(0)
            reply["seq"] = req.get("seq")
            try:
                wire.write_frame(self.out, reply, out_blobs)
            except (TypeError, ValueError) as e:  # a reply JSON cannot hold: its error instead
                wire.write_frame(self.out, {"err": wire.exception_data(e), "seq": req.get("seq")}, [])

    def op_load(self, req, blobs, out):
        spec = req["spec"]
        if spec.startswith("model:"):  # a model adapter (--model): posenc.adapters.model
            from posenc.adapters import load_model_adapter
            self.adapter = load_model_adapter(spec[len("model:"):])
        else:
            from posenc.adapters import load_adapter
            self.adapter = load_adapter(spec)
        return None

    def op_run_scenario(self, req, blobs, out):
        """:func:`posenc.conformance.model_suite.run_scenario` here, on the model adapter; its record."""
        from posenc.conformance.model_suite import run_scenario
        trace = run_scenario(self.adapter, req["scenario"], req["dtype"], req["attn"], req["device"],
                             int(req.get("seed", 0)))
        return wire.encode(trace, out, self._handle)

    def op_getattr(self, req, blobs, out):
        target = self._in(req["target"], blobs)
        value = getattr(target, req["name"])
        if callable(value) and not isinstance(value, type):
            return {"$bound": req["name"]}  # a method: called by name, no handle made
        return self._out(value, out)

    def op_call(self, req, blobs, out):
        target = self._in(req["target"], blobs)
        fn = getattr(target, req["name"]) if req["name"] else target
        args = self._in(req["args"], blobs)
        kwargs = self._in(req["kwargs"], blobs)
        return self._out(fn(*args, **kwargs), out, by_value=req.get("by_value", False))

    def op_str(self, req, blobs, out):
        return str(self._in(req["target"], blobs))

    def op_ping(self, req, blobs, out):
        return None

    def op_natives(self, req, blobs, out):
        """``from_numpy`` of each array sent (a private copy) and a snapshot of its value; an
        array marked ``store`` is kept (read-only) for later requests that name it ``cached``."""
        handles = []
        for item in req["items"]:
            x = self.adapter.from_numpy(self._array(item, blobs), item["dtype"], req["device"])
            h = self._handle(x)
            try:
                self.snapshots[h["$h"]] = (item["name"], np.array(self.adapter.to_numpy(x), copy=True))
            except Exception:  # noqa: BLE001 - a broken to_numpy fails where the outputs are converted
                pass
            handles.append(h)
        return {"$t": handles}

    def _cached(self, item: dict, blobs):
        """The value an item stands for: sent inline (``value``; kept when marked ``store``) or
        named from the cache (``cached``)."""
        if "cached" in item:
            return self.cache[item["cached"]]
        value = self._in(item["value"], blobs)
        if "store" in item:
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
            self.cache[item["store"]] = value
        return value

    def _array(self, item: dict, blobs) -> np.ndarray:
        """A private (writeable) copy of an array sent inline or named from the cache."""
        return np.array(self._cached(item, blobs), copy=True)

    def op_run_op(self, req, blobs, out):
        """:func:`posenc.harness.runner.run_op` here, on the adapter itself, but the outputs' shapes (judged
        where the call came from: a shape a divergence gives is diagnosed there); its NumPy outputs."""
        from posenc.harness.runner import run_op_unshaped
        inputs = {name: self._array(item, blobs) for name, item in req["steps"][0].items()}
        params = self._cached(req["params"], blobs)
        outputs = run_op_unshaped(self.adapter, req["name"], params, inputs, req["dtype"], req["device"])
        return wire.encode(outputs, out, self._handle)

    def op_run_steps(self, req, blobs, out):
        """:func:`posenc.harness.runner.run_steps` here: every step on one prepared object; the steps' NumPy
        outputs (their shapes judged where the call came from)."""
        from posenc.harness.runner import run_steps_unshaped
        steps = [{name: self._array(item, blobs) for name, item in s.items()} for s in req["steps"]]
        params = self._cached(req["params"], blobs)
        outputs = run_steps_unshaped(self.adapter, req["name"], params, steps, req["dtype"], req["device"])
        return wire.encode(outputs, out, self._handle)

    def op_changed(self, req, blobs, out):
        """``[name, changed, size]`` of the first handed input (of those named) that changed."""
        from posenc.harness.runner import changed_elements
        for k in req["handles"]:
            if k not in self.snapshots:
                continue
            name, snap = self.snapshots.pop(k)
            try:
                now = np.asarray(self.adapter.to_numpy(self.objects[k]))
            except Exception:  # noqa: BLE001 - reported where the outputs are converted
                continue
            changed = changed_elements(now, snap)
            if changed:
                return [name, changed, int(snap.size)]
        return None

    def op_facts(self, req, blobs, out):
        """What the contract check of one output needs, in one round trip: its type's names and
        ``dtype_of``, ``device_of``, ``to_numpy`` (each a value or the exception it raised)."""
        x = self._in(req["target"], blobs)
        res = {"mro": {"$j": class_names(type(x))}}
        for key, fn in (("dtype", self.adapter.dtype_of), ("device", lambda v: str(self.adapter.device_of(v))),
                        ("array", self.adapter.to_numpy)):
            try:
                v = fn(x)
                if key == "array":
                    from posenc.harness.runner import plain_array
                    v = plain_array(self.adapter, v)
                res[key] = {"$d": {"ok": wire.encode(v, out, lambda o: {"$h": 0, "mro": class_names(type(o)),
                                                                      "call": False, "unsent": True})}}
            except Exception as e:  # noqa: BLE001
                res[key] = {"$d": {"err": {"$j": wire.exception_data(e)}}}
        return {"$d": res}


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the plugin owns Ctrl-C and ends this process
    watch = os.environ.pop("POSENC_WORKER_WATCH", None)
    if watch:  # a guard that ends this process group once the plugin's process is gone, however it died
        from posenc.conformance.reaping import guard
        guard(int(watch), os.environ.get("POSENC_WORKER_SPILL"), os.environ.pop("POSENC_WORKER_LOG", None))
    proto_in = wire.Reader(os.dup(0))
    proto_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # the adapter's prints (Python and C) go to the log, never into the protocol
    sys.stdout = os.fdopen(1, "w", buffering=1)
    wire.spill_to(os.environ.get("POSENC_WORKER_SPILL") or None)
    wire.IMPORT_MODELS = True  # the plugin's parameter models (another package's family too)
    Worker(proto_in, proto_out).serve()


if __name__ == "__main__":
    main()
