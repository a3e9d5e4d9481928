"""What the committed matrices say about one clause: each wrapped implementation's status.

Read by the spec site (a clause's "Implementations" table) and by ``posenc card``.  The sources are
``docs/conformance-matrix.json`` (operation clauses: clause x adapter x dtype, written by ``posenc
matrix``) and ``docs/model-matrix.json`` (MODEL-* scenarios: model x attention x scenario x dtype).
Both are files of the kit's checkout, read from :func:`committed_docs_dir` (``$POSENC_MATRICES``, else the
``docs/`` of the checkout an editable install runs from, found from the distribution's metadata -- never
from the working directory or a path built from ``__file__``): an installed kit without them (a wheel)
reports no status (``None``), never a made-up one.
"""

from __future__ import annotations

import json
import os
from importlib import metadata
from urllib.parse import unquote, urlparse
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

from posenc.spec.files import loads_json, read_regular
from posenc.tools import model_matrix
from posenc.tools.matrix import JSON_NAME

#: the distribution whose checkout holds the committed matrices, and the variable that names another folder
DISTRIBUTION = "posenc-conformance"
#: The most bytes of a committed matrix this module reads (the conformance matrix is about 1 MB)
MATRIX_LIMIT = 256 << 20
MATRICES_VAR = "POSENC_MATRICES"

#: verdict words, worst first: the summary of a clause across dtypes is its worst cell
_ORDER = ("fail", "kit error", "diverges", "unsupported", "n/a", "pass")


@dataclass(frozen=True)
class ImplementationStatus:
    """One implementation's standing on one clause.

    ``implementation``: an adapter name (``hf-transformers``) or a model (``hf:llama``);
    ``status``: ``conforms`` (pass at every dtype run), ``diverges`` (a recorded divergence at
    some dtype), ``fails`` (an unexplained failure), ``cannot express`` (unsupported at every dtype:
    the implementation has no such parameter or operation), ``not applicable`` (model scenarios
    that do not apply to the architecture); ``dtypes``: ``{dtype: verdict}``; ``divergences``: the
    divergence IDs recorded; ``note``: e.g. ``"unsupported at bfloat16"`` for a partial cell.
    """

    implementation: str
    status: str
    dtypes: dict
    divergences: tuple[str, ...]
    note: str = ""


def _norm(verdict) -> str:
    """A cell's verdict as one of :data:`_ORDER` (``passed`` -> pass, ``error`` / ``failed`` -> fail, a
    verdict this module does not know -> fail: never read as a pass)."""
    v = str(verdict).lower().strip()
    if v.startswith("kit error"):
        return "kit error"
    if v.startswith(("fail", "error")):
        return "fail"
    for word in ("diverges", "unsupported", "n/a", "pass"):
        if v.startswith(word):
            return word
    return "fail"


def _summarise(impl: str, dtypes: dict, divs) -> ImplementationStatus:
    words = {dt: _norm(v) for dt, v in dtypes.items()}
    ran = {dt: w for dt, w in words.items() if w != "n/a"}  # a scenario n/a at some dtypes: judged where it ran
    words = ran or words
    worst = min(words.values(), key=_ORDER.index) if words else "n/a"
    status = {"fail": "fails", "kit error": "fails", "diverges": "diverges", "unsupported": "cannot express",
              "n/a": "not applicable", "pass": "conforms"}.get(worst, worst)
    note = ""
    if status == "cannot express" and any(w == "pass" for w in words.values()):
        status = "conforms"
        note = "unsupported at " + ", ".join(dt for dt, w in words.items() if w == "unsupported")
    elif status in ("diverges", "fails"):
        bad = [dt for dt, w in words.items() if w in ("diverges", "fail", "kit error")]
        if len(bad) < len(words):
            note = f"at {', '.join(bad)}"
    return ImplementationStatus(impl, status, dict(dtypes), tuple(sorted(set(divs))), note)


@lru_cache(maxsize=4)
def _load(path: Path) -> Optional[dict]:
    try:
        return loads_json(read_regular(path, MATRIX_LIMIT, "matrix").decode("utf-8-sig"))
    except (OSError, ValueError):  # not a regular file, too big, malformed, nested too deep
        return None


def committed_docs_dir() -> Optional[Path]:
    """The folder of the committed matrices: ``$POSENC_MATRICES`` where set, else the ``docs/`` folder of the
    checkout the kit runs from (an editable install: its ``direct_url.json``); None for a wheel."""
    given = os.environ.get(MATRICES_VAR)
    return Path(given) if given else _checkout_docs()


@lru_cache(maxsize=1)
def _checkout_docs() -> Optional[Path]:
    """``docs/`` of the checkout an editable install runs from (read once: the install does not change
    while the process runs; the site asks for every ID)."""
    try:
        direct = json.loads(metadata.distribution(DISTRIBUTION).read_text("direct_url.json") or "{}")
    except (metadata.PackageNotFoundError, ValueError):
        return None
    url = urlparse(direct.get("url", ""))
    if url.scheme != "file" or not (direct.get("dir_info") or {}).get("editable"):
        return None
    return Path(unquote(url.path)) / "docs"


def matrix_available(docs_dir: Optional[Path] = None) -> bool:
    docs_dir = Path(docs_dir) if docs_dir is not None else committed_docs_dir()
    return docs_dir is not None and _load(docs_dir / JSON_NAME) is not None


def clause_status(clause_id: str, docs_dir: Optional[Path] = None) -> Optional[list[ImplementationStatus]]:
    """Each implementation's status on ``clause_id`` from the committed matrices (in ``docs_dir``, default
    :func:`committed_docs_dir`), sorted by name; ``[]`` when the matrix has no row for the clause, ``None``
    when no matrix is available."""
    docs_dir = Path(docs_dir) if docs_dir is not None else committed_docs_dir()
    if docs_dir is None:
        return None
    if clause_id.startswith("MODEL-"):
        mm = _load(docs_dir / model_matrix.JSON_NAME)
        if mm is None:
            return None
        scen = {s["clause"]: s["name"] for s in mm.get("scenarios", [])}.get(clause_id)
        if scen is None:
            return []
        out = []
        for model, cells in sorted(mm.get("cells", {}).items()):
            dtypes: dict = {}
            divs: list = []
            for key, cell in cells.items():
                attn, _, name = key.partition("-")
                if name != scen:
                    continue
                divs += cell.get("divergences", [])
                for dt in mm.get("dtypes", []):
                    if dt in cell:
                        prev = dtypes.get(dt)
                        word = _norm(cell[dt])
                        if prev is None or _ORDER.index(word) < _ORDER.index(_norm(prev)):  # the worse attention
                            dtypes[dt] = cell[dt]
            if dtypes:
                out.append(_summarise(model, dtypes, divs))
        return out
    cm = _load(docs_dir / JSON_NAME)
    if cm is None:
        return None
    per: dict[str, dict] = {}
    divs: dict[str, list] = {}
    for dt, rows in cm.get("cells", {}).items():
        for adapter, cell in (rows.get(clause_id) or {}).items():
            per.setdefault(adapter, {})[dt] = cell.get("verdict", "n/a")
            divs.setdefault(adapter, []).extend(cell.get("divergences", []))
    return [_summarise(a, per[a], divs[a]) for a in sorted(per)]
