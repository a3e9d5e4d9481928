"""Released spec versions: the snapshots that citations such as ``ROPE-PAIR-HALF@0.3.0`` resolve to.

Every released version's family files are kept, as they were released, in
``spec/versions/<version>/`` (installed with the package), their sha256 recorded in
``spec/versions/manifest.json`` (:func:`verify_snapshot`; :func:`release` records the next one).  The
snapshots of 0.1.0 - 0.3.0 are the files of the last commit that carried each version.  A snapshot is read as plain YAML, not
through :mod:`posenc.spec.document`: older versions predate fields the current models require
(``id_prefixes`` before 0.3.0), and a citation must resolve to what the ID meant then, whatever the
schema became since.  The spec being edited (:data:`posenc.spec.SPEC_VERSION`) is a released
version when its snapshot exists; then the working files must equal it (``posenc spec validate``
and the kit's tests check it), so a released version never changes.

An ID's *meaning* is fixed by its ``since``: a rule that changes gets a new ``since`` (and a
CHANGELOG line), so ``ID@V`` still means what it meant at ``V`` exactly when the ID existed at ``V``
with the same ``since`` as now.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Optional

from .errors import SpecError
from .loader import SPEC_DIR, SPEC_VERSION, load_spec, read_yaml, version_key  # noqa: F401 (version_key: public here too)

VERSIONS_DIR = Path(__file__).resolve().parent / "versions"
#: ``{version: {file name: sha256}}`` of every released version: which versions are released, and what
#: their files must be (a kept snapshot edited, removed or added to is an error, never a silent change)
MANIFEST_NAME = "manifest.json"


def _manifest() -> dict[str, dict[str, str]]:
    import json
    path = VERSIONS_DIR / MANIFEST_NAME
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SpecError(f"{path}: not a readable JSON manifest: {e}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise SpecError(f"{path}: expected {{version: {{file: sha256}}}}")
    for v in data:
        if not isinstance(v, str) or not _is_version(v):
            raise SpecError(f"{path}: {v!r} is not a spec version (MAJOR.MINOR.PATCH)")
    return data


def _is_version(text: str) -> bool:
    import re
    return re.fullmatch(r"\d+\.\d+\.\d+", text) is not None


def released_versions() -> list[str]:
    """Every released version (the manifest ``spec/versions/manifest.json``), oldest first."""
    return sorted(_manifest(), key=version_key)


def verify_snapshot(version: str) -> None:
    """``SpecError`` naming the file when ``spec/versions/<version>/`` is not exactly what was released
    (a file edited, missing or added)."""
    import hashlib
    expected = _manifest().get(version)
    if expected is None:
        raise SpecError(f"spec version {version} is not released (not in spec/versions/{MANIFEST_NAME})")
    directory = VERSIONS_DIR / version
    found = {p.name: p for p in directory.glob("*.yaml")} if directory.is_dir() else {}
    for name in sorted(set(expected) | set(found)):
        where = f"spec/versions/{version}/{name}"
        if name not in found:
            raise SpecError(f"{where}: missing from the released snapshot (restore it from the history)")
        if name not in expected:
            raise SpecError(f"{where}: not part of the released snapshot (released versions never change)")
        digest = hashlib.sha256(found[name].read_bytes()).hexdigest()
        if digest != expected[name]:
            raise SpecError(f"{where}: differs from the released snapshot (sha256 {digest[:12]}..., released "
                            f"{expected[name][:12]}...): released versions never change")


def verify_all() -> None:
    """Every released snapshot intact, and no snapshot folder the manifest does not list."""
    for v in released_versions():
        verify_snapshot(v)
    if VERSIONS_DIR.is_dir():
        extra = sorted(p.name for p in VERSIONS_DIR.iterdir() if p.is_dir() and p.name not in _manifest())
        if extra:
            raise SpecError(f"spec/versions/: {', '.join(extra)} not in {MANIFEST_NAME} (record a release with "
                            "`posenc spec release`)")


def release() -> str:
    """Keep the working spec as the released snapshot of :data:`posenc.spec.SPEC_VERSION` and record
    it in the manifest; returns the version.  ``SpecError`` when that version is already released."""
    import hashlib
    import json
    import shutil
    man = _manifest()
    if SPEC_VERSION in man:
        raise SpecError(f"spec {SPEC_VERSION} is already released: start the next version first")
    target = VERSIONS_DIR / SPEC_VERSION
    if target.exists():
        raise SpecError(f"{target} exists but is not in {MANIFEST_NAME}: remove it or restore the manifest")
    target.mkdir(parents=True)
    man[SPEC_VERSION] = {}
    for path in sorted(SPEC_DIR.glob("*.yaml")):
        shutil.copyfile(path, target / path.name)
        man[SPEC_VERSION][path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    (VERSIONS_DIR / MANIFEST_NAME).write_text(json.dumps(man, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    clear_caches()
    return SPEC_VERSION


def is_released(version: str) -> bool:
    return version in released_versions()


def known_versions() -> list[str]:
    """The released versions and, when it is still in development, the current one; oldest first."""
    out = released_versions()
    if SPEC_VERSION not in out:
        out.append(SPEC_VERSION)
    return sorted(out, key=version_key)


@dataclass(frozen=True)
class Snapshot:
    """One spec version as plain data.

    ``families``: ``{family: the family file as a dict}``; ``entries``: ``{ID: entry dict}`` over
    every clause and divergence, each entry with ``kind`` (``"clause"`` / ``"divergence"``) and
    ``family`` added; ``released``: whether this is a kept snapshot (False: the current spec,
    in development).
    """

    version: str
    released: bool
    families: dict[str, dict] = field(repr=False)
    entries: dict[str, dict] = field(repr=False)

    def entry(self, ident: str) -> Optional[dict]:
        return self.entries.get(ident)

    @property
    def clauses(self) -> dict[str, dict]:
        return {k: e for k, e in self.entries.items() if e["kind"] == "clause"}

    @property
    def divergences(self) -> dict[str, dict]:
        return {k: e for k, e in self.entries.items() if e["kind"] == "divergence"}

    @cached_property
    def violators(self) -> dict[str, list[str]]:
        """``{clause ID: the divergence IDs that violate it}``, in file order."""
        out: dict[str, list[str]] = {}
        for d in self.divergences.values():
            for cid in d.get("violates") or []:
                out.setdefault(cid, []).append(d["id"])
        return out


def _entries(version: str, families: dict[str, dict], where: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for fam, raw in families.items():
        for kind, key in (("clause", "clauses"), ("divergence", "divergences")):
            for i, item in enumerate(raw.get(key) or []):
                if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                    raise SpecError(f"{where}/{fam}: {key}.{i}: an entry without an `id`")
                if item["id"] in out:
                    raise SpecError(f"{where}/{fam}: {key}.{i}: {item['id']} is defined twice in spec {version}")
                out[item["id"]] = {**item, "kind": kind, "family": fam}
    return out


@lru_cache(maxsize=None)
def snapshot(version: str) -> Snapshot:
    """The spec of ``version``: its kept snapshot, or the working spec when ``version`` is the
    current one and not yet released.  ``SpecError`` for a version that does not exist."""
    version_key(version)
    directory = VERSIONS_DIR / version
    released = version in released_versions()
    if released:
        verify_snapshot(version)
    else:
        if version != SPEC_VERSION:
            raise SpecError(f"spec version {version} does not exist (known: {', '.join(known_versions())})")
        directory = SPEC_DIR
    families: dict[str, dict] = {}
    import yaml
    for path in sorted(directory.glob("*.yaml")):
        try:
            raw = read_yaml(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, yaml.YAMLError) as e:
            raise SpecError(f"{path}: not valid YAML: {e}") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("family"), str):
            raise SpecError(f"{path}: not a spec family file (no `family`)")
        if str(raw.get("spec_version")) != version:
            raise SpecError(f"{path}: spec_version {raw.get('spec_version')!r} in the snapshot of {version}")
        families[raw["family"]] = raw
    return Snapshot(version, released, families, _entries(version, families, str(directory)))


def check_released_unchanged() -> Optional[str]:
    """``None`` when the working spec is in development or equals its released snapshot; else a
    message naming the files that differ (a released version must not change: bump the version).
    Every kept snapshot is verified first (:func:`verify_all`: ``SpecError`` naming the file)."""
    directory = VERSIONS_DIR / SPEC_VERSION
    verify_all()
    if not is_released(SPEC_VERSION):
        return None
    work = {p.name: p.read_bytes() for p in SPEC_DIR.glob("*.yaml")}
    kept = {p.name: p.read_bytes() for p in directory.glob("*.yaml")}
    differ = sorted(n for n in set(work) | set(kept) if work.get(n) != kept.get(n))
    if not differ:
        return None
    return (f"spec {SPEC_VERSION} is released (spec/versions/{SPEC_VERSION}/) but {', '.join(differ)} differ from "
            f"its snapshot: a released version never changes -- start the next version (SPEC_VERSION, every "
            f"file's spec_version, a CHANGELOG heading '(in development)') and edit that")


@dataclass(frozen=True)
class Resolution:
    """What ``ID[@VERSION]`` resolves to.  ``problems``: ``(code, message, hint)`` triples, empty
    when the citation is good; ``notes``: informational lines (wording edited, same meaning)."""

    ident: str
    version: Optional[str]
    entry: Optional[dict]
    problems: tuple[tuple[str, str, str], ...] = ()
    notes: tuple[str, ...] = ()


def resolve(ident: str, version: Optional[str] = None) -> Resolution:
    """Resolve a citation against the current spec and, with ``version``, that version's snapshot.

    Problem codes: ``unknown-version``, ``unknown-id`` (in no version), ``not-in-version`` (the ID
    was added later), ``superseded`` (the current spec replaces it), ``meaning-changed`` (its
    ``since`` is newer than the cited version).
    """
    current = snapshot(SPEC_VERSION)
    now = current.entry(ident)
    registered = False
    if now is None:  # a family registered outside the kit (posenc.families entry point): its current file
        now = _registered_entry(ident)
        registered = now is not None
    problems: list[tuple[str, str, str]] = []
    notes: list[str] = []
    known = known_versions()  # read once per call (it reads the manifest)
    if version is not None and version not in known:
        problems.append(("unknown-version", f"spec version {version} does not exist",
                         f"known versions: {', '.join(known)}"))
        version = None  # the ID itself is still checked against the current spec
    if now is None:
        older = [v for v in known if snapshot(v).entry(ident) is not None]
        if older:
            problems.append(("unknown-id", f"{ident} is not in the current spec {SPEC_VERSION} "
                             f"(last in {older[-1]})", f"see spec/CHANGELOG.md ({older[-1]})"))
        else:
            problems.append(("unknown-id", f"{ident} is not a clause or divergence ID of any spec version",
                             _near(ident, current)))
        return Resolution(ident, version, None, tuple(problems))
    if now.get("superseded_by"):
        repl = ", ".join(f"{r}@{citable_since(r)}" if current.entry(r) else r for r in now["superseded_by"])
        problems.append(("superseded", f"{ident} is superseded by {repl} in spec {SPEC_VERSION}",
                         f"cite {repl} instead"))
    if version is not None and registered:  # no kept snapshots of another package's family: its `since` only
        if version_key(str(now["since"])) > version_key(version):
            problems.append(("meaning-changed", f"{ident} (family {now['family']}, registered outside the kit) "
                             f"means what it means since {now['since']}, after {version}",
                             f"check the code against the current rule and cite {ident}@{now['since']}"))
    elif version is not None:
        then = snapshot(version).entry(ident)
        if then is None:
            problems.append(("not-in-version", f"{ident} does not exist in spec {version} (first in "
                             f"{citable_since(ident)})", f"cite {ident}@{citable_since(ident)}"))
        elif version_key(str(now["since"])) > version_key(version):
            problems.append(("meaning-changed", f"{ident} changed meaning since {version}: its current meaning "
                             f"dates from {now['since']}", f"read spec/CHANGELOG.md ({now['since']}), check the code "
                             f"against the current rule and cite {ident}@{citable_since(ident)}"))
        else:
            for key in ("statement", "formula", "description"):
                if then.get(key) != now.get(key):
                    notes.append(f"{ident}: the {key} was reworded after {version} (same meaning: since {now['since']})")
    return Resolution(ident, version, now, tuple(problems), tuple(notes))


#: ``[(key, spec)]``: :func:`_loaded_spec`'s last load (the spec or ``None``) and what it was loaded from
_LOADED: list = []


def _loaded_spec():
    """``load_spec()`` -- the kit's spec files and those of the families registered so far -- or ``None``
    when it does not load.  Like :func:`snapshot`, read once per process for what it is read from (the spec
    version, the spec folder, the registered files): resolving many IDs outside the kit's snapshots (each
    distinct ID cite-check finds) loads the YAML once, not once per ID.  :func:`release` and a family
    registered later start it afresh; :func:`clear_caches` too."""
    from . import loader
    key = (SPEC_VERSION, str(loader.SPEC_DIR), tuple(loader._REGISTERED_FILES), load_spec)
    if not _LOADED or _LOADED[0][0] != key:
        try:
            spec = load_spec()
        except SpecError:
            spec = None
        _LOADED[:] = [(key, spec)]
    return _LOADED[0][1]


def clear_caches() -> None:
    """Forget what was read of the spec (the snapshots, the loaded current spec): read again on next use."""
    snapshot.cache_clear()
    _LOADED.clear()


def _registered_entry(ident: str) -> Optional[dict]:
    """A clause or divergence of a family registered outside the kit, as a snapshot entry (or None)."""
    spec = _loaded_spec()
    if spec is None:
        return None
    item = spec.clauses.get(ident) or spec.divergences.get(ident)
    if item is None:
        return None
    kind = "clause" if ident in spec.clauses else "divergence"
    return {**item.model_dump(mode="json"), "kind": kind, "family": spec.family_of_clause(ident)}


def citable_since(ident: str) -> str:
    """The oldest version in which ``ident`` exists with its current meaning: what a citation can pin.

    Usually its ``since``; later when the meaning is older than the ID (DIV-ROPE-BF16-ANGLE-PRODUCT
    names, from 0.4.0, the meaning DIV-ROPE-BF16-ANGLES had since 0.2.0).  ``SpecError`` for an ID
    not in the current spec."""
    now = snapshot(SPEC_VERSION).entry(ident)
    if now is None:
        registered = _registered_entry(ident)
        if registered is not None:
            return str(registered["since"])
        raise SpecError(f"{ident} is not in the current spec {SPEC_VERSION}")
    for v in known_versions():
        then = snapshot(v).entry(ident)
        if then is not None and str(then.get("since")) == str(now.get("since")):
            return v
    return str(now["since"])


def _near(ident: str, current: Snapshot) -> str:
    import difflib
    # only IDs whose length allows the cutoff (difflib's own first test, real_quick_ratio, done here once per
    # length instead of once per ID): the same matches, without a Python loop over every ID per unknown token
    n = len(ident)
    cands = [e for e in current.entries if 2.0 * min(n, len(e)) / (n + len(e)) >= 0.7]
    close = difflib.get_close_matches(ident, cands, n=3, cutoff=0.7)
    return f"did you mean {' or '.join(close)}?" if close else "posenc spec list shows every ID"
