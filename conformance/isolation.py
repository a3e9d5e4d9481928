"""Crash isolation: the adapter runs in a persistent worker process (``--posenc-isolation
process``, the default of a serial run).

:class:`RemoteAdapter` stands for the adapter in the plugin's process.  ``runner.run_op`` (golden,
generated, most invariant checks) and ``runner.run_steps`` (a decode loop) run whole in
:mod:`posenc.conformance.worker` -- input copies, the calls, the unchanged-input and output contract checks --
as one request; golden inputs and parameter models are sent once per worker.  For the other checks that drive
an adapter step by step, every attribute read and method call is a request, and the native arrays and prepared
objects stay in the worker as :class:`RemoteObject` handles.  Arrays cross as ``.npy`` bytes (large ones as
files in a tmpfs folder), parameters as JSON (:mod:`posenc.conformance.wire`); nothing is pickled.  The kit's
own checks and verdicts stay in the plugin's process.

When the worker dies inside a call (an exit, a signal, an out-of-memory kill: SIGKILL) the call
raises :class:`AdapterCrashed` -- the test fails by ID with its clauses, and the next call starts
a fresh worker (handles of the dead one are refused).  ``--posenc-timeout`` (pytest-timeout's
SIGALRM) interrupts the plugin's wait: the hung worker is killed and restarted, so a hang in C
code or an adapter that swallows exceptions cannot stall the run.  After
:data:`MAX_CRASHES` crashes no worker is started again: the remaining tests fail at once,
naming the first crash.  The worker is a fresh interpreter (``subprocess``, never ``fork``), so
the threads JAX and TensorFlow start at import are safe; it runs in its own session, so the
user's Ctrl-C reaches only the plugin, which ends the worker.  It never outlives the plugin's
process (:mod:`posenc.conformance.reaping`); under pytest-xdist each xdist worker has its own, the
crash credits shared (:mod:`posenc.conformance.crashes`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional

import numpy as np

from posenc.adapters import Unsupported
from posenc.spec.errors import AdapterError, UsageError

from posenc.conformance import reaping, wire
from posenc.conformance.crashes import Crashes
from posenc.harness.remote import Remote, RemoteCrash, RemoteFailure, RemoteHandle, RemoteValue, is_remote, type_names  # noqa: F401 (re-exported)

#: The third crashed (or hung) worker is the last: the remaining tests fail at once.
MAX_CRASHES = 3


class AdapterInterrupt(KeyboardInterrupt):
    """A KeyboardInterrupt the adapter raised itself in its process: the run stops, as at the user's
    Ctrl-C (the worker ignores SIGINT, so it is never the user's)."""


class AdapterCrashed(AdapterError, RemoteCrash):
    """The adapter's worker died (or was ended after a timeout) in a call; ``summary``: that, in one line."""

    def __init__(self, text: str, summary: str = ""):
        super().__init__(text)
        self.summary = summary or text.split("; its last output: ", 1)[0]


_REBUILT: dict[tuple, type] = {}


def _rebuild(info: dict) -> BaseException:
    """An exception like the worker's: its exact class when the plugin's process has it loaded
    (builtins, posenc, pytest's outcomes, an imported library), else its nearest such base,
    named as the original."""
    if any(q == Unsupported.__qualname__ and m == Unsupported.__module__ for m, q in info["mro"]):
        return Unsupported(info.get("reason") or info["msg"])
    base: type = Exception
    for mod, qual in info["mro"]:
        obj = sys.modules.get(mod)
        for part in qual.split("."):
            obj = getattr(obj, part, None)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            base = obj
            break
    name = info["mro"][0][1].rsplit(".", 1)[-1]
    key = (info["mro"][0][0], name, base)
    cls, e = _REBUILT.get(key), None
    for bases in ((RemoteFailure, base), (RemoteFailure, Exception)):
        try:  # a base that cannot be subclassed with the mixin, or whose __new__ takes arguments (pydantic's
            cls = cls or type(name, bases, {"__module__": info["mro"][0][0]})  # ValidationError): Exception
            e = cls.__new__(cls)
            break
        except TypeError:
            cls = None
    _REBUILT[key] = cls
    e.args, e.remote_message = (info["msg"],), info["msg"]
    e.remote_where = tuple(info["where"]) if info.get("where") else None
    if info.get("outcome_msg") is not None:  # pytest's skip / fail / xfail / exit raised by the adapter
        e.msg, e.pytrace = info["outcome_msg"], False
    return e


class RemoteObject(RemoteHandle):
    """An object held by the worker (a native array, a prepared operation, a device object).
    Attribute reads and ``str`` are requests; the type's names (``remote_types``) are local."""

    __slots__ = ("_worker", "_id", "_gen", "remote_types", "_methods", "__weakref__")

    def __init__(self, worker: "Worker", hid: int, gen: int, types: list[str], methods=()):
        object.__setattr__(self, "_worker", worker)
        object.__setattr__(self, "_id", hid)
        object.__setattr__(self, "_gen", gen)
        object.__setattr__(self, "remote_types", tuple(types))
        object.__setattr__(self, "_methods", frozenset(methods))

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if name in self._methods:  # a method its class defines: called by name, no lookup request
            return RemoteMethod(self._worker, self, name)
        return self._worker.getattr(self, name)

    def __str__(self) -> str:
        return self._worker.request({"op": "str", "target": self._worker.ref(self)})

    def __repr__(self) -> str:
        return f"<{self.remote_types[0]} in the adapter's process>"

    def __del__(self):
        try:
            if self._gen == self._worker.gen:
                self._worker.released.append(self._id)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class RemoteCallable(RemoteObject):
    """A callable held by the worker (a prepared operation's factory result)."""

    __slots__ = ()

    def __call__(self, *args, **kwargs):
        return self._worker.call(self, None, args, kwargs)


class Unsent(RemoteValue):
    """What a ``to_numpy`` / ``dtype_of`` returned that is not plain data (its type's names)."""

    def __init__(self, types):
        self.remote_types = tuple(types)


class RemoteMethod:
    """A method of a remote object, called by name."""

    __slots__ = ("_worker", "_target", "_name")

    def __init__(self, worker, target, name):
        self._worker, self._target, self._name = worker, target, name

    def __call__(self, *args, **kwargs):
        return self._worker.call(self._target, self._name, args, kwargs,
                                 by_value=self._name == "to_numpy" and self._target is self._worker.root)

    def __repr__(self) -> str:
        return f"<method {self._name} in the adapter's process>"


class Worker:
    """The worker process and its connection; restarted after a crash, up to :data:`MAX_CRASHES`."""

    def __init__(self, spec: str, root: "RemoteAdapter", ledger: Optional[str] = None,
                 startup_limit: Optional[float] = None):
        self.spec, self.root = spec, root
        self.proc: Optional[subprocess.Popen] = None
        self.gen = 0
        self.released: list[int] = []
        self.sent: dict[int, tuple[Any, int]] = {}  # id(immutable array or frozen model) -> (it, key in the worker's cache)
        self.closed = False
        self.affinity: Optional[set[int]] = None  # this process's CPUs before the worker was pinned with it
        self.crashes = Crashes(ledger)  # the run's (every pytest-xdist worker's, under -n N)
        self.ended: Optional[tuple[str, int]] = None  # (test, crash number) of the last worker ended while waiting
        self.seq = 0  # the last request's number (its reply echoes it)
        self.log_start = 0
        self.current = "(start-up)"  # the test running, for the crash messages
        self.startup_limit = startup_limit  # seconds a request may take before any test runs (--posenc-timeout)
        self.watch: Optional[int] = None  # the write end of the guard's pipe (reaping.guard)
        shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        reaping.sweep(tempfile.gettempdir(), "worker")  # what runs that died left behind
        reaping.sweep(shm or tempfile.gettempdir(), "arrays")
        self.log = tempfile.NamedTemporaryFile(prefix=reaping.owned_name("worker"), suffix=".log", delete=False)
        self.spill = tempfile.mkdtemp(prefix=reaping.owned_name("arrays"), dir=shm)  # large arrays (wire.SPILL_BYTES)
        wire.spill_to(self.spill)
        atexit.register(self.close)
        reaping.install(self)  # SIGTERM / SIGHUP to pytest end the worker and remove its files

    # ---- process ------------------------------------------------------------------------
    def start(self) -> None:
        self._pin()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
        env["POSENC_WORKER_SPILL"] = self.spill
        env["POSENC_WORKER_LOG"] = self.log.name
        try:
            self.log_start = os.path.getsize(self.log.name)  # this worker's output starts here
        except OSError:
            self.log_start = 0
        watch_r, self.watch = os.pipe()  # the worker's guard reads end of file once this process is gone
        env["POSENC_WORKER_WATCH"] = str(watch_r)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "posenc.conformance.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self.log, env=env, cwd=os.getcwd(), start_new_session=True, pass_fds=(watch_r,))
        finally:
            os.close(watch_r)
        reaping.keep_priority(self.proc.pid)  # its own session: its own scheduling group under autogroup
        self.reader, self.seq = wire.Reader(self.proc.stdout.fileno(), self.proc), 0
        self.gen += 1
        self.released = []
        self.sent = {}  # the new worker's cache starts empty
        self.request({"op": "load", "spec": self.spec}, starting=True)

    def _pin(self) -> None:
        """Run this process and the worker on one CPU while the worker lives (restored by
        :meth:`close`).  Requests alternate strictly, so nothing runs in parallel anyway; on two
        CPUs each hand-over would otherwise wake an idle (virtual) CPU, which costs more than most
        requests (measured by bench/bench_isolation.py).  The adapter sees that one CPU (its
        framework's thread pool sizes itself to it).  ``POSENC_CPU=N`` picks the CPU (``posenc
        matrix`` gives parallel jobs different ones), ``POSENC_CPU=none`` leaves the affinity alone."""
        want = os.environ.get("POSENC_CPU", "")
        if self.affinity is not None or not hasattr(os, "sched_getaffinity") or want == "none":
            return
        cpus = os.sched_getaffinity(0)
        if len(cpus) < 2:
            return
        gw = os.environ.get("PYTEST_XDIST_WORKER", "")[2:]  # -n N: xdist worker gwK takes the K-th CPU
        cpu = (int(want) if want.isdigit() and int(want) in cpus else
               sorted(cpus)[int(gw) % len(cpus)] if gw.isdigit() else _current_cpu(cpus))
        self.affinity = cpus
        os.sched_setaffinity(0, {cpu})

    def _unpin(self) -> None:
        if self.affinity is not None:
            try:
                os.sched_setaffinity(0, self.affinity)
            except OSError:
                pass
            self.affinity = None

    def _kill(self, grace: float = 0.0) -> Optional[int]:
        """End the worker and every process it started (its process group); its exit status.
        ``grace``: seconds to let a worker that closed the connection finish exiting first, so
        that its own exit status (not this kill) is what the crash message reports."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        try:
            if grace and proc.poll() is None:
                try:
                    proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    pass
            _kill_group(proc)
            return proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            return None
        finally:
            self._unwatch()
            self.reader.close()
            for s in (proc.stdin, proc.stdout):
                try:
                    s.close()
                except Exception:  # noqa: BLE001
                    pass

    def _unwatch(self) -> None:
        """Close the guard's pipe: the guard ends the worker's process group (if it still runs)."""
        watch, self.watch = self.watch, None
        if watch is not None:
            try:
                os.close(watch)
            except OSError:
                pass

    def abandon(self) -> None:
        """SIGTERM / SIGHUP to this process (:mod:`posenc.conformance.reaping`): kill the worker's
        process group now and remove its files."""
        self._kill()
        self.close()

    def close(self) -> None:
        """End the worker: its input closes (it exits on its own, unwaited); one that is still
        running when this process exits is killed by the atexit hook."""
        self.closed = True
        reaping.uninstall(self)
        proc, self.proc = self.proc, None
        if proc is not None:
            self.reader.close()
            for s in (proc.stdin, proc.stdout):
                try:
                    s.close()
                except Exception:  # noqa: BLE001
                    pass
            atexit.register(_reap, proc, self.watch)
            self.watch = None
        try:
            self.log.close()
            os.unlink(self.log.name)
        except OSError:
            pass
        shutil.rmtree(self.spill, ignore_errors=True)
        self._unpin()

    def _log_tail(self, lines: int = 3) -> str:
        try:
            self.log.flush()
            with open(self.log.name, "rb") as f:
                f.seek(max(self.log_start, os.path.getsize(self.log.name) - 4000))
                tail = [ln for ln in f.read().decode(errors="replace").splitlines() if ln.strip()][-lines:]
        except OSError:
            return ""
        return ("; its last output: " + " | ".join(t.strip()[:200] for t in tail)) if tail else ""

    @staticmethod
    def _exit_text(rc: Optional[int]) -> str:
        if rc is None:
            return "it did not report an exit status"
        if rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = f"signal {-rc}"
            return f"killed by {name}" + (" (an out-of-memory kill sends SIGKILL)" if -rc == signal.SIGKILL else "")
        return f"exit status {rc}"

    def _crashed(self, what: str, why: str, short: str = "") -> AdapterCrashed:
        """``why``: what happened, the worker's last output included; ``short``: without it."""
        text = f"the adapter's process {why} during {what}"
        self.crashes.append(f"{self.current}: {text}")
        n = len(self.crashes)
        more = (f"; the next call starts a fresh process (crash {n} of {MAX_CRASHES})" if n < MAX_CRASHES else
                f"; that was crash {MAX_CRASHES}: no process is started again, the remaining tests fail")
        return AdapterCrashed(text + more, f"the adapter's process {short or why} during {what} (crash {n} of "
                                           f"{MAX_CRASHES})")

    # ---- requests -----------------------------------------------------------------------
    def request(self, req: dict, blobs: Optional[list[bytes]] = None, starting: bool = False):
        if self.proc is None:
            if self.closed:
                raise AdapterCrashed("the adapter's process was ended with the run")
            crashes = self.crashes.all()
            if len(crashes) >= MAX_CRASHES:
                raise AdapterCrashed(f"not run: the adapter's process crashed {len(crashes)} times "
                                     f"(the first: {crashes[0]})")
            self.start()
        if self.released and not starting:
            req["release"], self.released = self.released, []
        what = req.get("name") or req["op"]
        proc = self.proc
        self.seq += 1
        req["seq"] = self.seq
        limit = self.startup_limit if self.current == "(start-up)" else None  # in a test: --posenc-timeout's alarm
        self.reader.deadline = time.monotonic() + limit if limit else None
        try:
            wire.write_frame(proc.stdin, req, blobs or [])
            reply, rblobs = wire.read_frame(self.reader)
        except TimeoutError:  # loading or describing the adapter hung: no test to fail, the run cannot start
            self._kill()
            raise UsageError(f"{self._option()}: no answer within {limit:g} s (--posenc-timeout) while loading or "
                             f"describing it ({what}): the adapter hangs there") from None
        except (EOFError, OSError, ValueError) as e:
            broken = isinstance(e, ValueError)  # bytes that are no reply: it is ended, not dead
            rc = self._kill(grace=0.0 if broken else 2.0)
            short = f"broke the connection ({e}) and was ended" if broken else f"died ({self._exit_text(rc)})"
            why = (f"broke the connection ({e}) and was ended{self._log_tail()}" if broken else
                   f"died ({self._exit_text(rc)}{self._log_tail()})")
            if starting and self.gen == 1:
                raise UsageError(f"{self._option()}: the adapter's process {why} while loading it") from None
            raise self._crashed("loading the adapter again" if starting else what, why, short) from None
        except BaseException:  # a --posenc-timeout (SIGALRM) or Ctrl-C while the worker works: end it
            self._kill()
            self.crashes.append(f"{self.current}: the adapter's process was ended during {what} (timeout or "
                                "interrupt)")
            self.ended = (self.current, len(self.crashes))
            raise
        if reply.get("seq") != self.seq:  # a second process answered (a fork of the worker's)
            self._kill()
            raise self._crashed(what, "answered out of turn (a reply to another request: a second process "
                                      "the adapter started writes into the connection)") from None
        if "interrupt" in reply:  # the adapter raised KeyboardInterrupt itself: the run stops
            raise AdapterInterrupt(f"raised by the adapter in its process during {what}: {reply['interrupt']['msg']}")
        if "err" in reply:
            e = _rebuild(reply["err"])
            if starting and self.gen > 1:  # it loaded before: counted like a crash (a lock the dead one left?)
                self._kill()
                raise self._crashed("loading the adapter again", f"raised {reply['err']['mro'][0][1]}: {e}") from None
            if starting:
                self._kill()
                if isinstance(e, UsageError):
                    raise UsageError(str(e)) from None
                raise UsageError(f"{self._option()}: loading it in the adapter's process raised "
                                 f"{reply['err']['mro'][0][1]}: {e}") from None
            raise e
        return wire.decode(reply["ok"], rblobs, self._handle)

    def _option(self) -> str:
        """The command-line option and value the worker was started for (``--model`` for a model)."""
        model = self.spec.startswith("model:")
        return f"--model {self.spec[len('model:'):]!r}" if model else f"--adapter {self.spec!r}"

    def _handle(self, d: dict):
        if d.get("unsent"):
            return Unsent(d["mro"])
        cls = RemoteCallable if d.get("call") else RemoteObject
        return cls(self, d["$h"], self.gen, d["mro"], d.get("methods", ()))

    def ref(self, obj) -> dict:
        if obj is self.root:
            return {"$h": 0}
        if obj._gen != self.gen:
            raise AdapterCrashed(f"{obj!r} was made by an earlier adapter process (it crashed since)")
        return {"$h": obj._id}

    def _encode_arg(self, value, blobs):
        def other(v):
            if isinstance(v, (RemoteObject, RemoteAdapter)):
                return self.ref(v)
            raise TypeError(f"posenc cannot send a {type(v).__name__} to the adapter's process")
        return wire.encode(value, blobs, other)

    def _item(self, obj, blobs: list[bytes], keep: bool) -> dict:
        """How ``obj`` travels in a request: ``value`` inline, or -- when ``keep`` (it can never
        change) -- sent once per worker (``store``) and named from its cache afterwards (``cached``)."""
        if self.proc is None:
            self.request({"op": "ping"})  # start the next worker first: its cache starts empty
        key = self.sent.get(id(obj))
        if key is not None and key[0] is obj:
            return {"cached": key[1]}
        item = {"value": self._encode_arg(obj, blobs)}
        if keep:
            self.sent[id(obj)] = (obj, len(self.sent) + 1)
            item["store"] = len(self.sent)
        return item

    def array_item(self, a: np.ndarray, blobs: list[bytes]) -> dict:
        """An array: kept when immutable (a golden's, over ``bytes``)."""
        return self._item(a, blobs, _immutable(a))

    def params_item(self, params, blobs: list[bytes]) -> dict:
        """A parameter model: kept when frozen (the spec's models are; run_op copies it before the
        adapter sees it)."""
        frozen = getattr(getattr(params, "model_config", None), "get", lambda k: None)("frozen")
        return self._item(params, blobs, bool(frozen))

    def getattr(self, target, name: str):
        out = self.request({"op": "getattr", "target": self.ref(target), "name": name})
        if isinstance(out, dict) and set(out) == {"$bound"}:
            return RemoteMethod(self, target, name)
        return out

    def call(self, target, name: Optional[str], args, kwargs, by_value: bool = False):
        blobs: list[bytes] = []
        req = {"op": "call", "target": self.ref(target), "name": name, "by_value": by_value,
               "args": self._encode_arg(tuple(args), blobs), "kwargs": self._encode_arg(dict(kwargs), blobs)}
        return self.request(req, blobs)


def _current_cpu(cpus: set[int]) -> int:
    """The CPU this process runs on (``/proc/self/stat``), if it is one of ``cpus``."""
    try:
        with open("/proc/self/stat") as f:
            cpu = int(f.read().rsplit(")", 1)[1].split()[36])
        return cpu if cpu in cpus else min(cpus)
    except (OSError, ValueError, IndexError):
        return min(cpus)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL to the worker's process group (it leads one: ``start_new_session``), so that a
    process the adapter forked dies with it, and to the worker itself."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:  # the group is gone already
        pass
    if proc.poll() is None:
        proc.kill()


def _reap(proc: subprocess.Popen, watch: Optional[int] = None) -> None:
    try:
        proc.wait(timeout=0.5)  # it exits on its own once its input is closed
    except Exception:  # noqa: BLE001 - still busy (a hung call) or slow to exit
        pass
    _kill_group(proc)  # and whatever the adapter left running (its guard too)
    if watch is not None:
        try:
            os.close(watch)
        except OSError:
            pass


class RemoteAdapter(Remote):
    """The adapter under test, running in its worker process (see the module docstring).

    Non-callable attributes (``name``, ``dtypes``, ...) are read once and kept; methods are
    requests.  ``posenc_run_op`` runs :func:`~posenc.harness.runner.run_op` in the worker;
    ``posenc_natives`` / ``posenc_changed`` / ``posenc_facts`` are the fused requests for the input
    copies and the output contract of the step-by-step checks (one round trip each).
    """

    def __init__(self, spec: str, ledger: Optional[str] = None, startup_limit: Optional[float] = None):
        object.__setattr__(self, "_w", Worker(spec, self, ledger, startup_limit))
        object.__setattr__(self, "_attrs", {})
        self._w.start()

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        attrs = object.__getattribute__(self, "_attrs")
        if name in attrs:
            return attrs[name]
        out = attrs[name] = self._w.getattr(self, name)  # read once, like the plugin's attribute checks
        return out

    def __setattr__(self, name, value):
        raise AttributeError("the isolated adapter's attributes cannot be set from the plugin")

    def __repr__(self) -> str:
        return f"<adapter {self._attrs.get('name', self._w.spec)!r} in its worker process>"

    # ---- the kit's fused requests ---------------------------------------------------------
    def posenc_set_current(self, nodeid: str) -> None:
        self._w.current = nodeid

    def posenc_natives(self, specs: list, device: str) -> list:
        """``from_numpy`` in the worker of each ``(name, array, dtype)`` (a private copy there, its
        snapshot kept for :meth:`posenc_changed`)."""
        blobs: list[bytes] = []
        items = [{"name": name, "dtype": dtype, **self._w.array_item(a, blobs)} for name, a, dtype in specs]
        return list(self._w.request({"op": "natives", "items": items, "device": device}, blobs))

    def posenc_run_op(self, op: str, params, inputs: dict, dtype: str, device: str) -> dict:
        """:func:`~posenc.harness.runner.run_op` in the worker (copies, checks there): NumPy outputs or its error."""
        return self._run("run_op", op, params, [inputs], dtype, device)

    def posenc_run_steps(self, op: str, params, steps: list, dtype: str, device: str) -> list:
        """:func:`~posenc.harness.runner.run_steps` in the worker (one prepared object there): as posenc_run_op."""
        return self._run("run_steps", op, params, steps, dtype, device)

    def _run(self, kind: str, op: str, params, steps: list, dtype: str, device: str):
        w, blobs = self._w, []  # each step's arrays, the parameters once
        items = [{name: w.array_item(np.asarray(a), blobs) for name, a in s.items()} for s in steps]
        return w.request({"op": kind, "name": op, "params": w.params_item(params, blobs), "steps": items,
                          "dtype": dtype, "device": device}, blobs)

    def posenc_run_scenario(self, scenario: str, dtype: str, attn: str, device: str, seed: int = 0) -> dict:
        """``model_suite.run_scenario`` in the worker: its record (plain data and arrays), or what it raised."""
        return self._w.request({"op": "run_scenario", "scenario": scenario, "dtype": dtype, "attn": attn,
                                "device": device, "seed": int(seed)})

    def posenc_changed(self, objs: list) -> Optional[tuple[str, int, int]]:
        ids = [o._id for o in objs if isinstance(o, RemoteObject) and o._gen == self._w.gen]
        if not ids:
            return None
        out = self._w.request({"op": "changed", "handles": ids})
        return tuple(out) if out else None

    def posenc_facts(self, x) -> dict:
        """``{"mro", "dtype", "device", "array"}`` of an output held by the worker; each of the
        last three ``("ok", value)`` or ``("err", exception)``."""
        return _facts(self._w.request({"op": "facts", "target": self._w.ref(x)}))

    def posenc_crashes(self) -> list[str]:
        return self._w.crashes.all()

    def posenc_ended(self, nodeid: str) -> Optional[int]:
        """The crash number of the worker ended during test ``nodeid`` (its timeout), if one was."""
        ended = self._w.ended
        return ended[1] if ended and ended[0] == nodeid else None

    def posenc_close(self) -> None:
        self._w.close()


def _facts(res: dict) -> dict:
    facts = {"mro": res["mro"]}
    for key in ("dtype", "device", "array"):
        v = res[key]
        facts[key] = ("ok", v["ok"]) if "ok" in v else ("err", _rebuild(v["err"]))
    return facts


def _immutable(a) -> bool:
    """``a``'s memory is ``bytes`` (a golden's arrays): its value can never change."""
    b = a
    while isinstance(b, np.ndarray):
        if b.flags.writeable:
            return False
        b = b.base
    return isinstance(b, bytes)


__all__ = ["AdapterCrashed", "AdapterInterrupt", "RemoteAdapter", "RemoteObject", "RemoteFailure", "MAX_CRASHES", "is_remote",
           "type_names"]
