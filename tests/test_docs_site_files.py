"""The spec site's folders: ``posenc docs build`` writes into the output folder without ever replacing the
folder itself (a mount point, its owner, group and mode stay; nothing temporary is left on any failure), and
``posenc docs serve`` serves only the site's regular files (no link leading out, no dot-file, no listing).
"""

from __future__ import annotations

import errno
import http.client
import os
import stat
import threading
from pathlib import Path

import pytest

from posenc.cli import main as cli
from posenc.tools import docs_site, site_files

pytest.importorskip("sphinx", reason="the [docs] extra (Sphinx) is not installed")


# ------------------------------------------------------------------------------------------- serving

@pytest.fixture
def site_dir(tmp_path):
    """A site folder with what must never be served beside what must: a link to ``/`` (and to a file outside),
    a ``.git`` folder, the marker, a dot-file in a sub-folder, a folder without ``index.html``."""
    root = tmp_path / "site"
    (root / "0.1.0" / "_static").mkdir(parents=True)
    (root / "index.html").write_text("<p>top</p>", encoding="utf-8")
    (root / "0.1.0" / "index.html").write_text("<p>v</p>", encoding="utf-8")
    (root / "0.1.0" / "rope.html").write_text("<p>rope</p>", encoding="utf-8")
    (root / "0.1.0" / "_static" / "a.css").write_text("a{}", encoding="utf-8")
    (root / "0.1.0" / ".buildinfo").write_text("x", encoding="utf-8")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]", encoding="utf-8")
    (root / site_files.MARKER).write_text(site_files.HEADER + "\n", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("secret", encoding="utf-8")
    (root / "rootfs").symlink_to("/")
    (root / "secret.html").symlink_to(tmp_path / "secret.txt")
    (root / "up").symlink_to(tmp_path)
    (root / "git").symlink_to(root / ".git")  # a link inside, to a dot-folder
    (root / "latest").symlink_to(root / "0.1.0")  # a link inside, to a site folder: fine
    return root


def _get(port: int, path: str) -> tuple[int, bytes, dict]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read(), dict(r.getheaders())
    finally:
        c.close()


@pytest.fixture
def port(site_dir):
    srv = docs_site.serve(site_dir, "127.0.0.1", 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize("path", [
    "/rootfs/etc/hostname", "/rootfs/etc/passwd", "/rootfs/", "/secret.html", "/up/secret.txt", "/.git/config",
    "/.git/", "/git/config", f"/{site_files.MARKER}", "/0.1.0/.buildinfo", "/../secret.txt", "/%2e%2e/secret.txt",
    "/0.1.0/%2e%2e/%2e%2e/secret.txt", "//etc/passwd", "/0.1.0/_static/", "/0.1.0/_static", "/%ff", "/%00",
    "/0.1.0/rope.html/", "/missing.html",
])
def test_serve_answers_404_outside_the_site(port, path):
    """A link leading out of the folder, a dot-file or dot-folder (``.git``, the marker), a folder without
    ``index.html`` (never a listing), a path climbing out: 404, and nothing of it in the answer."""
    status, body, _ = _get(port, path)
    assert status == 404, (path, status, body[:200])
    assert b"secret" not in body and b"[core]" not in body and b"root:" not in body and b"a.css" not in body


@pytest.mark.parametrize("path, text", [
    ("/", b"top"), ("/index.html", b"top"), ("/0.1.0/", b"<p>v</p>"), ("/0.1.0/rope.html", b"rope"),
    ("/0.1.0/rope.html?x=1", b"rope"), ("/0.1.0/_static/a.css", b"a{}"), ("/latest/rope.html", b"rope"),
])
def test_serve_answers_the_site(port, path, text):
    status, body, headers = _get(port, path)
    assert status == 200 and text in body, (path, status, body)
    assert int(headers["Content-Length"]) == len(body)


def test_serve_redirects_a_folder_to_its_slash(port):
    status, _, headers = _get(port, "/0.1.0")
    assert status == 301 and headers["Location"] == "/0.1.0/"


def test_serve_target_in_process(site_dir):
    """:func:`site_files.site_target`, the handler's choice, directly."""
    assert site_files.site_target(site_dir, "/0.1.0/") == os.path.realpath(site_dir / "0.1.0" / "index.html")
    assert site_files.site_target(site_dir, "/0.1.0") == site_files.REDIRECT
    assert site_files.site_target(site_dir, "/rootfs/etc/hostname") is None
    assert site_files.site_target(site_dir, "/.git/config") is None
    assert site_files.site_target(site_dir, "/0.1.0/_static/") is None  # a folder: its index.html or nothing


def _serve_once(monkeypatch):
    """``docs serve`` that returns at once (its server stops as Ctrl-C would stop it)."""
    real = docs_site.serve

    def serve(*a):
        srv = real(*a)
        srv.serve_forever = lambda *_: (_ for _ in ()).throw(KeyboardInterrupt())
        return srv
    monkeypatch.setattr(docs_site, "serve", serve)


@pytest.mark.parametrize("host, warned", [("0.0.0.0", True), ("127.0.0.1", False), ("localhost", False)])
def test_serve_beyond_loopback_warns(site_dir, monkeypatch, capsys, host, warned):
    """``--host`` other than a loopback address: a warning that the site is reachable from the network."""
    _serve_once(monkeypatch)
    assert cli(["docs", "serve", "--dir", str(site_dir), "--host", host, "--port", "0"]) == 0
    err = capsys.readouterr().err
    assert ("reachable from the network" in err) == warned, err
    if warned:
        assert err.startswith("warning: serving on 0.0.0.0") and err.count("\n") == 1


# ------------------------------------------------------------------------------------- building in place

def _leftovers(*folders: Path) -> list[str]:
    return [str(p) for f in folders for p in f.iterdir() if p.name.startswith((".posenc-site.", ".site."))
            or ".building-" in p.name or ".old-" in p.name]


def test_build_keeps_the_folder_its_owner_group_and_mode(tmp_path):
    """An existing folder (setgid, group-writable, another owner where the test may chown) is written into,
    never replaced: its inode, owner, group and mode are the same after a build and a rebuild."""
    out = tmp_path / "site"
    out.mkdir()
    if os.geteuid() == 0:
        os.chown(out, 65534, 65534)
    os.chmod(out, 0o2775)
    before = os.stat(out)
    for _ in range(2):
        docs_site.build(out, versions=["0.1.0"], cards=False)
        after = os.stat(out)
        assert (after.st_ino, after.st_uid, after.st_gid) == (before.st_ino, before.st_uid, before.st_gid)
        assert stat.S_IMODE(after.st_mode) == 0o2775
        assert (out / "0.1.0" / "rope.html").is_file() and site_files.is_site(out)
    assert not _leftovers(out, tmp_path)
    if os.geteuid() == 0:  # the files made inside the setgid folder have its group
        assert os.stat(out / "index.html").st_gid == 65534


def _renames_failing(monkeypatch, when):
    """``os.rename`` failing where ``when(src, dst, n)`` holds (``n``: how many calls it held for before)."""
    real, seen = os.rename, []

    def rename(src, dst, *a, **kw):
        if when(Path(src), Path(dst), len(seen)):
            seen.append(src)
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(src), None, str(dst))
        return real(src, dst, *a, **kw)
    monkeypatch.setattr(os, "rename", rename)


def test_build_into_a_mount_point(tmp_path, monkeypatch):
    """A folder that cannot be renamed (a mount point: EBUSY, simulated) receives the site."""
    out = tmp_path / "mnt"
    out.mkdir()
    _renames_failing(monkeypatch, lambda src, dst, n: src == out or dst == out)
    docs_site.build(out, versions=["0.1.0"], cards=False)
    assert (out / "0.1.0" / "rope.html").is_file() and site_files.is_site(out)
    docs_site.build(out, versions=["0.1.0"], cards=False)  # and a rebuild
    assert not _leftovers(out, tmp_path) and sorted(p.name for p in tmp_path.iterdir()) == ["mnt"]


@pytest.mark.parametrize("nth", [0, 1])
def test_failure_while_putting_the_site_in_place(tmp_path, monkeypatch, nth):
    """An OS error while the new site's paths are moved into the folder: everything moved is put back (the
    previous site whole, the user's files where they were), nothing temporary is left, and the error is one
    line naming the folder and the path."""
    out = tmp_path / "site"
    docs_site.build(out, versions=["0.1.0"], cards=False)
    (out / "CNAME").write_text("x", encoding="utf-8")
    (out / "0.1.0" / "notes.txt").write_text("mine", encoding="utf-8")
    before = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    into: list[Path] = []

    def nth_into_the_folder(src: Path, dst: Path, failed: int) -> bool:
        if dst == out or dst.parent == out:
            into.append(dst)
            return len(into) - 1 == nth
        return False
    _renames_failing(monkeypatch, nth_into_the_folder)
    with pytest.raises(docs_site.DocsError) as e:  # `posenc docs build` prints it after "error: "
        docs_site.build(out, versions=["0.1.0"], cards=False)
    assert str(e.value).startswith(f"{out}: cannot write the site: {os.strerror(errno.EBUSY)} ({out}/")
    assert "\n" not in str(e.value) and "[Errno" not in str(e.value)
    after = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert after == before
    assert not _leftovers(out, tmp_path) and sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def test_failed_build_leaves_nothing(tmp_path, monkeypatch, capsys):
    """A build that fails (Sphinx) leaves neither a temporary folder nor a new output folder, and an existing
    empty folder empty."""
    def broken(src, dest):
        raise docs_site.DocsError("Sphinx failed (simulated)")
    monkeypatch.setattr(docs_site, "run_sphinx", broken)
    with pytest.raises(docs_site.DocsError, match="simulated"):
        docs_site.build(tmp_path / "new" / "site", versions=["0.1.0"], cards=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new"] and not list((tmp_path / "new").iterdir())
    (tmp_path / "empty").mkdir()
    with pytest.raises(docs_site.DocsError, match="simulated"):
        docs_site.build(tmp_path / "empty", versions=["0.1.0"], cards=False)
    assert not list((tmp_path / "empty").iterdir())


def test_unwritable_folder_is_one_line(tmp_path, monkeypatch, capsys):
    """An OS error anywhere in the build (here: the temporary folder cannot be made) is one line naming the
    output folder, not a raw errno."""
    import tempfile
    out = tmp_path / "site"
    out.mkdir()

    def mkdtemp(*a, dir=None, **kw):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(dir))
    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    monkeypatch.setattr(docs_site, "need_sphinx", lambda: None)
    monkeypatch.setattr("posenc.spec.versions.known_versions", lambda: ["0.1.0"])
    assert cli(["docs", "build", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {out}: cannot write the site: Permission denied ({out})") and err.count("\n") == 1
    assert "[Errno" not in err and not list(out.iterdir())
