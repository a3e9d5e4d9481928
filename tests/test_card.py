"""``posenc card`` (posenc.tools.card): the figures against hand-derived values (closed
forms computed here with ``math``, never with the reference the card uses), the plots, the
Markdown / reStructuredText sections, the errors and the missing-matplotlib message."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import types
from pathlib import Path

import pytest

from posenc.tools import card as cardmod
from posenc.tools.card import MATPLOTLIB_MISSING, MissingExtra, build_card, registry_cards

PNG = b"\x89PNG\r\n\x1a\n"

GPT2 = {"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12}
OPT = {"model_type": "opt", "max_position_embeddings": 2048, "hidden_size": 768, "num_attention_heads": 12}
LLAMA3 = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
          "head_dim": 128, "max_position_embeddings": 131072, "rope_theta": 500000.0,
          "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 8192}}
QWEN_YARN = {"model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28, "max_position_embeddings": 131072,
             "rope_theta": 1000000.0, "rope_scaling": {"type": "yarn", "factor": 4.0,
                                                       "original_max_position_embeddings": 32768}}
DEEPSEEK = {"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128, "qk_rope_head_dim": 64,
            "max_position_embeddings": 163840, "rope_theta": 10000,
            "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                             "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}}
BLOOM8 = {"model_type": "bloom", "n_head": 8, "hidden_size": 512}
BLOOM6 = {"model_type": "bloom", "n_head": 6, "hidden_size": 384}
T5 = {"model_type": "t5", "d_model": 512, "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128}


def _write(tmp_path: Path, name: str, cfg: dict) -> Path:
    d = tmp_path / name
    d.mkdir()
    p = d / "config.json"
    p.write_text(json.dumps(cfg))
    return p


def _card(tmp_path, name, cfg):
    return build_card(_write(tmp_path, name, cfg))


def _comp(card, key):
    return next(c for c in card.components if c.key == key)


def _args(config, fmt="md", out=None):
    return argparse.Namespace(config=Path(config) if not isinstance(config, Path) else config, fmt=fmt, out=out)


# ---- learned tables ---------------------------------------------------------------------------


def test_gpt2_wpe_parameter_count(tmp_path):
    c = _card(tmp_path, "gpt2", GPT2)
    assert c.name == "gpt2"
    emb = _comp(c, "embeddings")
    assert emb.family == "learned"
    wpe = next(t for t in emb.tables if t.name == "wpe")
    assert (wpe.rows, wpe.dim) == (1024, 768)
    assert wpe.parameters == 786_432  # 1024 x 768, by hand
    assert wpe.positions == 1024
    md = c.to_markdown()
    assert "786,432" in md and "### Learned tables" in md
    assert "config: n_positions" in md  # provenance: the config key


def test_opt_table_includes_the_offset_rows(tmp_path):
    emb = _comp(_card(tmp_path, "opt", OPT), "embeddings")
    t = emb.tables[0]
    assert t.rows == 2050 and t.parameters == 1_574_400  # (2048 + 2) x 768, by hand
    assert t.positions == 2048  # the two offset rows hold no position


def test_library_default_provenance(tmp_path):
    c = _card(tmp_path, "gpt2d", {"model_type": "gpt2", "n_embd": 768})
    prov = {p.name: p.provenance for p in _comp(c, "embeddings").parameters}
    assert prov["n_embd"] == "config: n_embd"
    assert "library default" in prov["n_positions"] and "1024" in prov["n_positions"]


# ---- RoPE: wavelengths, llama3 band, angles ----------------------------------------------------


def _closed_wavelengths(theta: float, d: int) -> list[float]:
    return [2 * math.pi * theta ** (2 * i / d) for i in range(d // 2)]


def test_llama3_turns_and_band(tmp_path):
    c = _card(tmp_path, "Meta-Llama-3.1-8B", LLAMA3)
    assert c.name == "meta-llama-3.1-8b"
    r = _comp(c, "rope").rope
    wl = _closed_wavelengths(500000.0, 128)
    assert [p.wavelength for p in r.pairs] == pytest.approx(wl, rel=1e-12)
    turns = {t.label: t for t in r.turns}
    assert turns["context"].length == 131072 and turns["original context"].length == 8192
    assert turns["context"].unscaled == sum(w > 131072 for w in wl)
    assert turns["original context"].unscaled == sum(w > 8192 for w in wl)
    assert turns["original context"].unscaled_pairs == tuple(i for i, w in enumerate(wl) if w > 8192)
    # the band: low_freq_wavelen = 8192 / 1, high_freq_wavelen = 8192 / 4
    b = r.llama3
    assert (b.low_freq_wavelen, b.high_freq_wavelen) == (8192.0, 2048.0)
    assert b.band == tuple(i for i, w in enumerate(wl) if 2048 <= w <= 8192)
    assert b.kept == tuple(i for i, w in enumerate(wl) if w < 2048)
    assert b.divided == tuple(i for i, w in enumerate(wl) if w > 8192)
    assert b.band == tuple(range(29, 35))  # the same, written out: 2 pi 500000^(58/128) = 2402 > 2048
    # divided pairs: scaled wavelength is 8x
    for i in b.divided:
        assert r.pairs[i].scaled_wavelength == pytest.approx(8 * wl[i], rel=1e-12)
    for i in b.kept:
        assert r.pairs[i].scaled_wavelength == pytest.approx(wl[i], rel=1e-12)


def test_llama3_angles_at_the_end_of_the_context(tmp_path):
    r = _comp(_card(tmp_path, "llama", LLAMA3), "rope").rope
    end = {a.label: a for a in r.end_angles}["context"]
    assert end.position == 131071
    assert end.fastest_unscaled == pytest.approx(131071.0, rel=1e-12)
    slow = 131071 * 500000.0 ** (-126 / 128)
    assert end.slowest_unscaled == pytest.approx(slow, rel=1e-12)
    assert end.slowest_scaled == pytest.approx(slow / 8, rel=1e-12)  # pair 63 is divided by the factor
    assert end.fastest_scaled == pytest.approx(131071.0, rel=1e-12)  # pair 0 is kept


def _corr(d, L, beta, theta):
    return d * math.log(L / (2 * math.pi * beta)) / (2 * math.log(theta))


@pytest.mark.parametrize("cfg,d,L,theta", [(QWEN_YARN, 128, 32768, 1e6), (DEEPSEEK, 64, 4096, 1e4)])
def test_yarn_ramp_boundaries(tmp_path, cfg, d, L, theta):
    c = _card(tmp_path, cfg["model_type"], cfg)
    y = _comp(c, "rope").rope.yarn
    lo, hi = _corr(d, L, 32, theta), _corr(d, L, 1, theta)
    assert y.raw_low == pytest.approx(lo, rel=1e-12) and y.raw_high == pytest.approx(hi, rel=1e-12)
    assert (y.low, y.high) == (math.floor(lo), math.ceil(hi))
    assert y.kept == tuple(range(0, math.floor(lo) + 1))
    assert y.divided == tuple(range(math.ceil(hi), d // 2))
    assert y.blended == tuple(range(math.floor(lo) + 1, math.ceil(hi)))
    clauses = [ci.id for ci in _comp(c, "rope").clauses]
    assert "SCALE-YARN-RAMP" in clauses and "SCALE-LLAMA3" not in clauses


def test_qwen_yarn_numbers_written_out(tmp_path):
    y = _comp(_card(tmp_path, "qwen", QWEN_YARN), "rope").rope.yarn
    assert (y.low, y.high) == (23, 40)  # 128 ln(32768 / 64 pi) / (2 ln 1e6) = 23.6; beta 1: 39.65


# ---- ALiBi, T5 --------------------------------------------------------------------------------


def test_alibi_slopes_power_of_two(tmp_path):
    a = _comp(_card(tmp_path, "bloom8", BLOOM8), "alibi")
    assert a.slopes == [2.0 ** -k for k in range(1, 9)]
    assert [ci.id for ci in a.clauses][:2] == ["ALIBI-SLOPES", "ALIBI-BLOOM"]


def test_alibi_slopes_not_a_power_of_two(tmp_path):
    a = _comp(_card(tmp_path, "bloom6", BLOOM6), "alibi")
    # 6 heads: the 4 slopes of 4 heads (2^-2k), then every other slope of 8 heads (2^-1, 2^-3)
    assert a.slopes == [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3]


def _first_n(k: int) -> int:
    """Smallest distance n with (n / 8)^8 >= 16^k (integers only): where log bucket 8 + k starts."""
    n = 8
    while n ** 8 < 8 ** 8 * 16 ** k:
        n += 1
    return n


def test_t5_bucket_map_bidirectional(tmp_path):
    c = _card(tmp_path, "t5", T5)
    enc = {b.bucket: b for b in _comp(c, "encoder").buckets}
    assert len(enc) == 32
    for k in range(8):  # exact buckets: rel 0 .. -7, and 1 .. 7 in the upper half
        assert (enc[k].lo, enc[k].hi, enc[k].kind) == (-k, -k, "exact")
    for k in range(1, 8):
        assert (enc[16 + k].lo, enc[16 + k].hi) == (k, k)
    assert not enc[16].used  # rel > 0 with n = 0 never happens
    starts = [_first_n(k) for k in range(8)]
    assert starts == [8, 12, 16, 23, 32, 46, 64, 91]
    for k in range(8):
        b, up = enc[8 + k], enc[24 + k]
        assert b.kind == "log" and b.hi == -starts[k] and up.lo == starts[k]
        if k < 7:
            assert b.lo == -(starts[k + 1] - 1) and up.hi == starts[k + 1] - 1
    assert enc[15].lo is None and enc[31].hi is None  # open to -inf / +inf
    dec = {b.bucket: b for b in _comp(c, "decoder").buckets}
    assert (dec[0].lo, dec[0].hi) == (0, None)  # causal: every future key in bucket 0
    assert "### T5 buckets" in c.to_markdown()


# ---- output: Markdown, RST, plots -----------------------------------------------------------------


def test_markdown_sections_and_plot_references(tmp_path):
    c = _card(tmp_path, "llama", LLAMA3)
    md = c.to_markdown(plot_prefix="figs/")
    for section in ("# Positional-encoding card: llama", "## Summary", "## rope: rope (RopeParams)", "### Parameters",
                    "### Clauses", "### Wavelengths", "### llama3 smoothing band", "### Angle at the end of the context",
                    "### Implementations"):
        assert section in md, section
    for spec in c.plots():
        assert f"](figs/{spec.filename})" in md
    assert "SCALE-LLAMA3" in md and "ROPE-PAIR-HALF" in md and "Su et al., RoFormer" in md
    prov = {p.name: p.provenance for p in _comp(c, "rope").parameters}
    assert prov["rope_theta"] == "config: rope_theta" and prov["factor"] == "config: rope_scaling.factor"


def test_rst(tmp_path):
    c = _card(tmp_path, "bloom", BLOOM8)
    rst = c.to_rst(plot_prefix="plots/")
    assert ".. list-table::" in rst and ".. image:: plots/bloom-alibi-alibi-slopes.png" in rst
    core = pytest.importorskip("docutils.core")
    import io
    core.publish_string(rst, writer="html", settings_overrides={"halt_level": 2, "warning_stream": io.StringIO()})


@pytest.mark.parametrize("name,cfg,kinds", [("llama", LLAMA3, {"wavelengths", "inv_freq"}),
                                            ("bloom", BLOOM8, {"alibi_slopes"}), ("t5", T5, {"t5_buckets"})])
def test_plots_are_png(tmp_path, name, cfg, kinds):
    pytest.importorskip("matplotlib")
    c = _card(tmp_path, name, cfg)
    assert {s.kind for s in c.plots()} == kinds
    files = c.write_plots(tmp_path / "out")
    assert len(files) == len(c.plots()) and files
    for f in files:
        data = f.read_bytes()
        assert data[:8] == PNG and f.stat().st_size > 1000
        try:
            from PIL import Image
        except ImportError:
            continue
        with Image.open(f) as im:
            assert im.format == "PNG" and im.size[0] > 100


def test_matrix_status_absent_and_present(tmp_path, monkeypatch):
    from posenc.tools import matrix_status as ms
    monkeypatch.setattr(ms, "clause_status", lambda cid, docs_dir=None: None)
    monkeypatch.setattr(ms, "matrix_available", lambda docs_dir=None: False)
    md = _card(tmp_path, "a", BLOOM8).to_markdown()
    assert "No conformance matrix is available" in md
    fake = [ms.ImplementationStatus("lib-x", "diverges", {"float32": "diverges"}, ("DIV-X",), "")]
    monkeypatch.setattr(ms, "clause_status", lambda cid, docs_dir=None: fake)
    monkeypatch.setattr(ms, "matrix_available", lambda docs_dir=None: True)
    c = _card(tmp_path, "b", BLOOM8)
    assert all(ci.statuses == fake for ci in _comp(c, "alibi").clauses)
    assert "**diverges**: lib-x (DIV-X)" in c.to_markdown()


# ---- sources: registry, hf defaults ------------------------------------------------------------------


def test_registry_name_and_registry_cards():
    c = build_card("gpt2")
    assert c.kind == "registry" and c.source == "registry:gpt2"
    assert _comp(c, "embeddings").tables[0].parameters == 786_432
    cards = registry_cards()
    names = {x.name for x in cards}
    assert {"gpt2", "llama-3.1-8b", "bloom-176b", "t5-base"} <= names
    llama = next(x for x in cards if x.name == "llama-3.1-8b")
    assert _comp(llama, "rope").rope.llama3.band == tuple(range(29, 35))


def test_hf_model_type_defaults():
    c = build_card("hf:gemma3_text")
    keys = [x.key for x in c.components]
    assert keys == ["rope.full_attention", "rope.sliding_attention"]
    assert "LAYERS-SETS" in [ci.id for ci in c.components[0].clauses]


# ---- CLI ---------------------------------------------------------------------------------------------


def test_main_default_prints_markdown_and_writes_plots(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    cfg = _write(tmp_path, "Meta-Llama-3.1-8B", LLAMA3)
    monkeypatch.chdir(tmp_path)
    assert cardmod.main(_args(cfg)) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Positional-encoding card")
    assert "](posenc-card-meta-llama-3.1-8b/meta-llama-3.1-8b-rope-wavelengths.png)" in out
    assert (tmp_path / "posenc-card-meta-llama-3.1-8b" / "meta-llama-3.1-8b-rope-wavelengths.png").read_bytes()[:8] == PNG


def test_main_out_dir(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    cfg = _write(tmp_path, "gpt2", GPT2)
    assert cardmod.main(_args(cfg, out=tmp_path / "o")) == 0
    assert "786,432" in (tmp_path / "o" / "gpt2.md").read_text()


@pytest.mark.parametrize("content,needle", [
    (None, "no such file"),
    ('{"model_type": "llama",', "cannot read a JSON config"),
    (json.dumps({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2,
                 "rope_scaling": {"rope_type": "foo", "factor": 2.0}}), "rope_scaling.rope_type: unknown rope_type 'foo'"),
])
def test_main_errors_name_the_file(tmp_path, capsys, content, needle):
    path = tmp_path / "config.json"
    if content is not None:
        path.write_text(content)
    assert cardmod.main(_args(path)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(path) in err and needle in err


def test_missing_matplotlib(tmp_path, monkeypatch, capsys):
    c = _card(tmp_path, "bloom", BLOOM8)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(MissingExtra) as e:
        c.write_plots(tmp_path / "p")
    assert str(e.value) == MATPLOTLIB_MISSING
    assert "posenc-conformance[docs]" in MATPLOTLIB_MISSING
    cfg = tmp_path / "bloom" / "config.json"
    # the text card is still made, with a note where the plots would be (and a warning)
    assert cardmod.main(_args(cfg, out=tmp_path / "o")) == 0
    assert "pip install 'posenc-conformance[docs]'" in capsys.readouterr().err
    md = (tmp_path / "o" / "bloom.md").read_text()
    assert "Plots left out" in md and "posenc-conformance\\[docs\\]" in md and "![" not in md
    assert "ALiBi slopes" in md and not list((tmp_path / "o").glob("*.png"))
    assert c.to_markdown()  # the text needs no matplotlib


def test_html_calls_the_site_generator(tmp_path, monkeypatch, capsys):
    calls = []
    fake = types.ModuleType("posenc.tools.sphinx_build")
    fake.build_card_page = lambda card, out_dir: calls.append((card.name, out_dir)) or out_dir / "index.html"
    monkeypatch.setitem(sys.modules, "posenc.tools.sphinx_build", fake)
    cfg = _write(tmp_path, "gpt2", GPT2)
    assert cardmod.main(_args(cfg, fmt="html", out=tmp_path / "site")) == 0
    assert calls == [("gpt2", tmp_path / "site")]
    monkeypatch.setitem(sys.modules, "posenc.tools.sphinx_build", None)
    assert cardmod.main(_args(cfg, fmt="html")) == 2
    assert "site generator" in capsys.readouterr().err


# ---- hostile input -----------------------------------------------------------------------------------

PAYLOADS = ["evil\n\n.. raw:: html\n\n   <script>alert('pwned')</script>\n\nx",
            "ok` <javascript:alert(1)>`__",
            "a\u2028\u2028.. raw:: html\u2028\u2028   <script>alert(2)</script>",
            "[x](javascript:alert(3)) <img src=x onerror=alert(4)> |sub| *b* _i_ # h javascript:alert(5)",
            "- item\r\n<!-- c --> `x` &lt;script&gt; \\<b>",
            "通义千问/模型：长上下文\u0301 " + "x" * 2000]  # wide characters (RST underline width), a long name
_TAG = re.compile(r"(?<!\\)<[A-Za-z!/?]")


def _check_md(md: str) -> None:
    assert not _TAG.search(md), _TAG.search(md)  # no raw HTML tag (every < escaped)
    assert not re.search(r"(?<!\\)\]\(\s*javascript", md)  # no Markdown link to javascript:
    try:
        from markdown_it import MarkdownIt
    except ImportError:
        return
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)  # raw HTML passed through
    _check_html(html)
    assert all(re.fullmatch(r"[a-z0-9.-]+\.png", src) for src in re.findall(r"<img src=\"([^\"]*)\"", html))
    assert html.count("<img") == len(re.findall(r"<img src=", html))
    assert "<a " not in html and "<em>" not in html and html.count("<h1>") == 1


def _check_html(html: str) -> None:
    """No script but the site's own, no event-handler attribute, no javascript: URL, no raw tag
    from the payloads (parsed, so text and quoted attribute values do not count)."""
    from html.parser import HTMLParser

    found = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, dict(attrs)))
            self.tag = tag

        def handle_data(self, data):
            if getattr(self, "tag", None) == "script":
                assert "alert" not in data, data

    Tags().feed(html)
    for tag, attrs in found:
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
        for k in ("href", "src", "action"):
            assert not (attrs.get(k) or "").strip().lower().startswith(("javascript:", "data:")), (tag, attrs)
        if tag == "script":
            assert (attrs.get("src") or "_static/").startswith("_static/"), attrs
        if tag == "img":
            assert re.fullmatch(r"(plots/|_images/)?[a-z0-9.-]+\.png", attrs.get("src", "")), attrs


def _hostile_llama(tmp_path, name):
    return _write(tmp_path, "h", {"_name_or_path": name, "model_type": "llama", "hidden_size": 64,
                                  "num_attention_heads": 2, "max_position_embeddings": 128,
                                  "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                                   "original_max_position_embeddings": 64}})


@pytest.mark.parametrize("payload", PAYLOADS)
def test_name_or_path_is_escaped(tmp_path, payload):
    c = build_card(_hostile_llama(tmp_path, payload))
    assert re.fullmatch(r"[a-z0-9][a-z0-9.-]*", c.name) and ".." not in c.name and len(c.name) <= 80
    md = c.to_markdown()
    _check_md(md)
    assert md.startswith("# Positional-encoding card: ") and "\n\n.. raw" not in md
    core = pytest.importorskip("docutils.core")
    import io
    rst = c.to_rst()
    assert "\n.. raw" not in rst and "\n   <script" not in rst
    html = core.publish_string(rst, writer="html", settings_overrides={
        "halt_level": 2, "warning_stream": io.StringIO()}).decode()
    _check_html(html)


@pytest.mark.parametrize("payload", PAYLOADS[:2])
def test_name_or_path_is_escaped_in_the_built_page(tmp_path, payload):
    pytest.importorskip("sphinx")
    try:
        from posenc.tools.sphinx_build import build_card_page, need_sphinx as _need_sphinx
        _need_sphinx()
    except Exception:  # noqa: BLE001 - the [docs] extra is not installed
        pytest.skip("the site generator needs the [docs] extra")
    c = build_card(_hostile_llama(tmp_path, payload)).without_plots("no plots in this test")
    page = build_card_page(c, tmp_path / "site")
    _check_html(page.read_text(encoding="utf-8"))


def test_card_page_is_world_readable_and_keeps_other_files(tmp_path):
    """Folders 0755 and files 0644 whatever the umask; a file of the folder the page did not write stays."""
    import os
    import stat
    pytest.importorskip("sphinx")
    try:
        from posenc.tools.sphinx_build import build_card_page, need_sphinx as _need_sphinx
        _need_sphinx()
    except Exception:  # noqa: BLE001 - the [docs] extra is not installed
        pytest.skip("the site generator needs the [docs] extra")
    out = tmp_path / "site"
    out.mkdir()
    (out / "CNAME").write_text("cards.example.org\n", encoding="utf-8")
    c = build_card(_hostile_llama(tmp_path, "fine")).without_plots("no plots in this test")
    old = os.umask(0o077)
    try:
        build_card_page(c, out)
    finally:
        os.umask(old)
    assert (out / "CNAME").read_text(encoding="utf-8") == "cards.example.org\n"
    written = [p for p in [out, *out.rglob("*")] if p.name != "CNAME"]
    wrong = {str(p): oct(stat.S_IMODE(p.stat().st_mode)) for p in written
             if stat.S_IMODE(p.stat().st_mode) != (0o755 if p.is_dir() else 0o644)}
    assert len(written) > 10 and not wrong, list(wrong.items())[:5]


def test_every_outside_string_is_escaped(tmp_path):
    """Not only the name: model_type, keys, values, provenance, notes, sources, the context source,
    a clause's reason, the path."""
    c = build_card(_hostile_llama(tmp_path, "fine"))
    bad = PAYLOADS[0] + " " + PAYLOADS[1] + " " + PAYLOADS[3]
    c.model_type = c.source = c.rule = bad
    c.sources = [bad]
    c.notes.append(bad)
    comp = c.components[0]
    comp.key = bad
    comp.notes.append(bad)
    comp.parameters[0].value = bad
    comp.parameters[1].provenance = bad
    comp.clauses[0].why = bad
    comp.rope.context_source = bad
    comp.rope.extended_source = bad
    c.model_scenarios = []
    md = c.to_markdown()
    _check_md(md)
    assert "`" + "x" not in md.replace("\\`", "")  # no code span opened by outside text
    core = pytest.importorskip("docutils.core")
    import io
    html = core.publish_string(c.to_rst(), writer="html", settings_overrides={
        "halt_level": 2, "warning_stream": io.StringIO()}).decode()
    _check_html(html)
    for spec in c.plots():  # file names stay slugs
        assert re.fullmatch(r"[a-z0-9.-]+\.png", spec.filename)


def test_markdown_table_cells_and_blocks_hold(tmp_path):
    c = build_card(_hostile_llama(tmp_path, "fine"))
    c.notes.append("1. a | b\n# not a heading")
    comp = c.components[0]
    comp.parameters[0].value = "x | y | z"
    md = c.to_markdown()
    row = next(line for line in md.splitlines() if line.startswith("| `head_dim`"))
    assert row.count(" | ") == 3  # the value's pipes are escaped, the row keeps 4 cells
    assert "\n# not a heading" not in md and "- 1\\. a \\| b \\# not a heading" in md


# ---- --out -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_out_refuses_a_foreign_folder(tmp_path, capsys, monkeypatch, fmt):
    calls = []
    fake = types.ModuleType("posenc.tools.sphinx_build")
    fake.build_card_page = lambda card, out_dir: calls.append(out_dir) or out_dir / "index.html"
    monkeypatch.setitem(sys.modules, "posenc.tools.sphinx_build", fake)
    cfg = _write(tmp_path, "gpt2", GPT2)
    site = tmp_path / "mysite"
    site.mkdir()
    (site / "index.html").write_text("mine")
    assert cardmod.main(_args(cfg, fmt=fmt, out=site)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(site) in err and "refusing" in err and cardmod.OUT_MARKER in err
    assert (site / "index.html").read_text() == "mine" and not calls
    # a new folder, an empty one, and a previous card's output are fine
    for d in (tmp_path / "new", tmp_path / "empty"):
        if d.name == "empty":
            d.mkdir()
        assert cardmod.main(_args(cfg, fmt=fmt, out=d)) == 0
        assert (d / cardmod.OUT_MARKER).is_file()
        (d / "index.html").write_text("old card")
        assert cardmod.main(_args(cfg, fmt=fmt, out=d)) == 0


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_out_is_a_file(tmp_path, capsys, fmt):
    cfg = _write(tmp_path, "gpt2", GPT2)
    f = tmp_path / "afile"
    f.write_text("x")
    for out in (f, f / "sub"):
        assert cardmod.main(_args(cfg, fmt=fmt, out=out)) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "not a folder" in err
        assert "Errno" not in err and "Application error" not in err and "Traceback" not in err
    assert f.read_text() == "x"


def test_html_without_matplotlib_makes_the_page_without_plots(tmp_path, monkeypatch, capsys):
    seen = []
    fake = types.ModuleType("posenc.tools.sphinx_build")
    fake.build_card_page = lambda card, out_dir: seen.append(card) or out_dir / "index.html"
    monkeypatch.setitem(sys.modules, "posenc.tools.sphinx_build", fake)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    cfg = _write(tmp_path, "bloom", BLOOM8)
    assert cardmod.main(_args(cfg, fmt="html", out=tmp_path / "site")) == 0
    assert "posenc-conformance[docs]" in capsys.readouterr().err
    (card,) = seen
    assert card.plots() == [] and card.write_plots(tmp_path / "p") == []
    rst = card.to_rst()
    assert ".. image::" not in rst and "Plots left out" in rst


# ---- numbers read from the config ------------------------------------------------------------------------


def test_integral_float_context_is_the_context(tmp_path):
    cfg = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2, "max_position_embeddings": 128.0,
           "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}
    r = _comp(_card(tmp_path, "f", cfg), "rope").rope
    assert r.context == 128 and isinstance(r.context, int) and "config: max_position_embeddings" in r.context_source
    assert r.seq_len == 256  # factor 2 x 128, not 2 x the LlamaConfig default 2048
    turns = {t.label: t for t in r.turns}
    wl = _closed_wavelengths(10000.0, 32)
    assert turns["context"].length == 128 and turns["context"].unscaled == sum(w > 128 for w in wl)
    assert turns["extended context"].length == 256 and turns["extended context"].unscaled == sum(w > 256 for w in wl)
    assert {a.label: a for a in r.end_angles}["context"].fastest_unscaled == pytest.approx(127.0)


@pytest.mark.parametrize("value,needle", [(128.5, "fractional"), ("2048", "str"), (True, "bool"), (0, "int")])
def test_bad_context_is_an_error_not_the_default(tmp_path, capsys, value, needle):
    cfg = _write(tmp_path, "f", {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2,
                                 "max_position_embeddings": value})
    assert cardmod.main(_args(cfg)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {cfg}: max_position_embeddings: ") and needle in err and "2,048" not in err


def test_integral_float_context_of_mrope():
    r = _comp(build_card({"model_type": "qwen2_vl", "max_position_embeddings": 4096.0}), "mrope").rope
    assert r.context == 4096 and isinstance(r.context, int)


# ---- sizes ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cfg,field", [
    ({"model_type": "llama", "hidden_size": 2_000_000_000, "num_attention_heads": 1},
     "hidden_size / num_attention_heads"),
    ({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2, "head_dim": 1 << 20}, "head_dim"),
    ({"model_type": "bloom", "n_head": 1_000_000_000, "hidden_size": 1_000_000_000}, "n_head"),
    ({"model_type": "t5", "d_model": 512, "relative_attention_max_distance": 10 ** 9},
     "relative_attention_max_distance"),
    ({"model_type": "gpt2", "n_positions": 10 ** 10}, "n_positions"),
    ({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2, "max_position_embeddings": 10 ** 20},
     "max_position_embeddings"),
    ({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2, "max_position_embeddings": 128,
      "rope_scaling": {"rope_type": "dynamic", "factor": 1e299}}, "rope_scaling.factor"),
])
def test_absurd_sizes_are_refused_without_allocating(tmp_path, capsys, cfg, field):
    import tracemalloc
    path = _write(tmp_path, "big", cfg)
    tracemalloc.start()
    try:
        rc = cardmod.main(_args(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rc == 2 and peak < 64 * 2 ** 20
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: {field}: ") and "beyond the card's bound" in err


def test_long_tables_are_summarised(tmp_path):
    cfg = {"model_type": "llama", "hidden_size": 65536, "num_attention_heads": 1, "max_position_embeddings": 4096,
           "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}}
    c = _card(tmp_path, "wide", cfg)
    r = _comp(c, "rope").rope
    assert len(r.pairs) == 32768  # the figures are all there
    md = c.to_markdown()
    assert len(md) < 100_000 and "rows left out" in md
    rows = {line.split(" | ")[0].lstrip("| ") for line in md.splitlines() if line.startswith("| ")}
    for i in (0, 7, 32760, 32767, r.yarn.kept[-1], r.yarn.blended[0], r.yarn.blended[-1], r.yarn.divided[0]):
        assert str(i) in rows, i  # the first and last rows and the ramp's boundaries
    first = {t.label: t.unscaled_pairs[0] for t in r.turns}
    assert all(str(i) in rows and str(i - 1) in rows for i in first.values())
    a = _comp(_card(tmp_path, "bloom300", {"model_type": "bloom", "n_head": 300, "hidden_size": 300 * 64}), "alibi")
    md = build_card(tmp_path / "bloom300" / "config.json").to_markdown()
    assert len(a.slopes) == 300 and "| 255 |" in md and "| 256 |" in md and "| 150 |" not in md
    t5 = build_card(_write(tmp_path, "t5many", {"model_type": "t5", "relative_attention_num_buckets": 600,
                                                "relative_attention_max_distance": 4096})).to_markdown()
    assert "rows left out" in t5 and len(t5) < 60_000


# ---- scaled contexts ------------------------------------------------------------------------------------------


def test_registry_yarn_shows_the_extended_context():
    r = _comp(build_card("qwen2.5-7b-yarn"), "rope").rope
    assert (r.context, r.original_context, r.extended_context) == (32768, 32768, 131072)  # 4 x 32768
    turns = {t.label: t for t in r.turns}
    assert set(turns) == {"context (= original)", "extended context"}
    wl = _closed_wavelengths(1e6, 128)
    assert turns["extended context"].length == 131072
    assert turns["extended context"].unscaled == sum(w > 131072 for w in wl)
    end = {a.label: a for a in r.end_angles}["extended context"]
    assert end.position == 131071
    assert end.slowest_unscaled == pytest.approx(131071 * 1e6 ** (-126 / 128), rel=1e-12)
    md = build_card("qwen2.5-7b-yarn").to_markdown()
    assert "extended context 131,072 (factor 4 x original 32,768)" in md and "| extended context | 131,071 |" in md


def test_llama3_registry_extended_and_config_larger_context(tmp_path):
    r = _comp(build_card("llama-3.1-8b"), "rope").rope
    assert [t.label for t in r.turns] == ["original context", "extended context"]
    assert r.extended_context == 65536  # 8 x 8192; the registry states no max_position_embeddings
    r = _comp(_card(tmp_path, "llama", LLAMA3), "rope").rope
    assert r.extended_context == 131072 and [t.label for t in r.turns] == ["context", "original context"]


# ---- error messages, provenance ---------------------------------------------------------------------------------


def test_t5_error_names_the_field(tmp_path, capsys):
    path = tmp_path / "t5.json"
    path.write_text(json.dumps({"model_type": "t5", "relative_attention_num_buckets": 16,
                                "relative_attention_max_distance": 8}))
    assert cardmod.main(_args(path)) == 2
    err = capsys.readouterr().err
    assert ": : " not in err and "): relative_attention_max_distance: max_distance 8 must exceed" in err


def test_registry_provenance_credits_a_source_only_with_what_it_names():
    prov = {p.name: p.provenance for p in _comp(build_card("llama-3.1-8b"), "rope").parameters}
    assert not prov["pairing"].startswith("registry: meta-llama")
    assert "no source names this field" in prov["pairing"] and "meta-llama/llama-models" in prov["pairing"]
    prov = {p.name: p.provenance for p in _comp(build_card("gpt-j-6b"), "rope").parameters}
    assert prov["rope_theta"] == "registry: huggingface/transformers [library-default]"  # "theta 10000 hard-coded"
    assert prov["rotary_dim"] == "registry: EleutherAI/gpt-j-6b config.json [published-config]"


# ---- never through a symbolic link in --out (a link's target is not the tool's to write) ------------


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_out_never_writes_through_a_symlink(tmp_path, capsys, monkeypatch, fmt):
    import os
    pytest.importorskip("matplotlib")
    if fmt == "html":
        pytest.importorskip("sphinx")  # the real site generator: it copies the built page into DIR
    cfg = _write(tmp_path, "llama", {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2})
    victims = {n: tmp_path / f"victim-{n}" for n in ("marker", "md", "png", "html", "dir")}
    for v in victims.values():
        v.write_text("secret") if v.name != "victim-dir" else v.mkdir()
    os.chmod(victims["marker"], 0o600)
    # a symlinked marker: refused, one line, before anything is written; its target untouched
    out = tmp_path / "o1"
    out.mkdir()
    (out / cardmod.OUT_MARKER).symlink_to(victims["marker"])
    assert cardmod.main(_args(cfg, fmt=fmt, out=out)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and cardmod.OUT_MARKER in err and "link" in err
    assert victims["marker"].read_text() == "secret" and oct(victims["marker"].stat().st_mode & 0o777) == "0o600"
    assert sorted(p.name for p in out.iterdir()) == [cardmod.OUT_MARKER]
    # a previous card's output whose files are links: the links are replaced, their targets untouched
    out = tmp_path / "o2"
    assert cardmod.main(_args(cfg, fmt=fmt, out=out)) == 0
    capsys.readouterr()
    written = [p for p in out.rglob("*") if p.is_file() and p.name != cardmod.OUT_MARKER]
    assert written
    for p in written:
        p.unlink()
        kind = {".md": "md", ".png": "png"}.get(p.suffix, "html")
        p.symlink_to(victims[kind])
    if (out / "_images").is_dir():
        import shutil
        shutil.rmtree(out / "_images")
        (out / "_images").symlink_to(victims["dir"], target_is_directory=True)
    assert cardmod.main(_args(cfg, fmt=fmt, out=out)) == 0
    for n in ("marker", "md", "png", "html"):
        assert victims[n].read_text() == "secret", n
    assert not list(victims["dir"].iterdir())
    assert not [p for p in out.rglob("*") if p.is_symlink()]
    assert all(oct(p.stat().st_mode & 0o777) == "0o644" for p in out.rglob("*") if p.is_file())


def test_markdown_never_makes_math_or_autolinks_of_outside_text(tmp_path):
    """The tools review: `$x$` in a config's name was live TeX on GitHub, GitLab and Jupyter, and a bare
    http:// or www. text an autolink (GFM): escaped, they stay text."""
    c = build_card(_hostile_llama(tmp_path, "org/$\\href{javascript:alert(1)}{x}$ see http://evil.example www.evil.example "
                                            "me@evil.example"))
    title = c.to_markdown().splitlines()[0]
    assert "\\$\\\\href" in title and "$\\" not in title.replace("\\$", ""), title
    assert "http\\://evil" in title and "www\\.evil" in title and "me\\@evil" in title, title


def test_a_rotary_fraction_is_carded_with_its_clause(tmp_path):
    """GPT-NeoX's rotary_pct 0.29 of head 100 (the import keeps the fraction): the card lists
    ROPE-ROTARY-FRACTION with the width it sizes (28, not 29) and names it as what defines the fraction."""
    c = _card(tmp_path, "neox-029", {"model_type": "gpt_neox", "hidden_size": 800, "num_attention_heads": 8,
                                     "rotary_pct": 0.29})
    rope_card = next(x for x in c.components if x.family == "rope")
    why = {ci.id: ci.why for ci in rope_card.clauses}
    assert "ROPE-ROTARY-FRACTION" in why and why["ROPE-ROTARY-FRACTION"].endswith("= 28"), why
    defined = {p.name: p.defined_by for p in rope_card.parameters}
    assert "ROPE-ROTARY-FRACTION" in defined["partial_rotary_factor"], defined


@pytest.mark.parametrize("cfg, said", [
    ({"model_type": "gpt_neox", "hidden_size": 512, "num_attention_heads": 8, "rotary_pct": 0.5,
      "partial_rotary_factor": 0.75}, "config: rotary_pct"),  # GPTNeoXConfig ignores the top-level fraction
    ({"model_type": "phi", "hidden_size": 2560, "num_attention_heads": 32, "partial_rotary_factor": 0.4,
      "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}},
     "config: rope_parameters.partial_rotary_factor"),  # rope_parameters' own fraction wins
])
def test_a_fraction_names_the_key_it_was_read_from(tmp_path, cfg, said):
    rope_card = next(x for x in _card(tmp_path, cfg["model_type"], cfg).components if x.family == "rope")
    prm = next(p for p in rope_card.parameters if p.name == "partial_rotary_factor")
    assert prm.provenance == said, (prm.value, prm.provenance)
