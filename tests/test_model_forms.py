"""The model suite on the models real libraries have (issue 29): a model without an attention mask or
position_ids (its positions are its cache's slots) runs every scenario it can express; rows decoded at
different positions, positions in the thousands through the cache, and a position past the model's last
one (it must raise) are checked, and the plumbing bugs of each fail, named.

Each model is the example model adapter (docs/example_model_adapter.py) with text edits, run by a real
``pytest conformance --model`` process."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_variants = runpy.run_path(str(ROOT / "tests" / "example_variants.py"))
_variant, GENERATE = _variants["variant"], _variants["GENERATE"]

#: generate without a mask: every token real
GENERATE_NO_MASK = [(a, b.replace(
    "ids, mask, steps, passes, cache = np.asarray(input_ids), np.asarray(attention_mask), [], [], None",
    "ids, steps, passes, cache = np.asarray(input_ids), [], [], None\n"
    "        mask = np.ones(ids.shape, np.int64) if attention_mask is None else np.asarray(attention_mask)"))
    for a, b in GENERATE]
CAPS = "(\"cache\", \"position_ids\", \"inputs_embeds\", \"attention_mask\")"
#: positions are the cache's slots: no mask, no position_ids (torchtune's input_pos, a cache counter)
SLOTS = [*GENERATE_NO_MASK[:-1], (CAPS, "(\"cache\", \"inputs_embeds\", \"generate\")")]
#: a table of 256 positions that raises past its end
LIMIT = [("    probes, dtypes, num_layers =", "    max_positions = 256\n    probes, dtypes, num_layers ="),
         ("        ang = pos[:, None, :, None].double() * self.inv",
          "        if int(pos.max()) >= 256:\n            raise IndexError('position past the table')\n"
          "        ang = pos[:, None, :, None].double() * self.inv")]
ANGLE = "        ang = pos[:, None, :, None].double() * self.inv"


def _run(tmp_path: Path, model: Path, *args: str, dtype: str = "float32"):
    return _variants["run_model"](tmp_path, model, *args, dtype=dtype)


def _outcomes(report: dict) -> dict[str, str]:
    return _variants["outcomes"](report, "default-")


def test_a_model_without_mask_or_position_ids_runs_what_it_can_express(tmp_path):
    """Generate of rows of one length, right padding (causal), positions in the thousands through a filled
    cache: run, not unsupported; what needs a mask or explicit positions is unsupported with the reason
    (a position past the last one, for such a model: test_a_position_past_the_last_one_must_raise)."""
    p, report = _run(tmp_path, _variant(tmp_path, "slots", *SLOTS))
    assert p.returncode == 0, p.stdout[-3000:]
    got = _outcomes(report)
    for name in ("prefill", "batch", "decode", "chunked-prefill", "right-pad", "inputs-embeds", "generate-equal",
                 "far-decode"):
        assert got[name] == "passed", (name, got)
    for name in ("left-pad", "left-pad-mask-only", "generate", "packed", "decode-per-row", "position-shift"):
        assert got[name] == "unsupported", (name, got)
    packed = next(r for r in report["results"] if r["case"] == "default-packed")
    assert "position_ids (" in packed["reason"] and " or cu_seqlens (" in packed["reason"], packed
    assert got["position-limit"] == "n/a", got  # no max_positions declared
    assert "decode step 5 == one pass at position 1" in p.stdout or "far-decode" in got, got


def test_positions_rounded_in_low_precision_fail_far_decode_through_the_cache(tmp_path):
    """A model that keeps its position counter in bfloat16 is exact below 256: only positions in the
    thousands, reached through its cache's slots, show it."""
    bug = [(ANGLE, "        ang = pos.to(torch.bfloat16).to(torch.int64)[:, None, :, None].double() * self.inv")]
    p, report = _run(tmp_path, _variant(tmp_path, "slots_bf16", *SLOTS, *bug),
                     "-k", "far-decode or default-decode or chunked")
    got = _outcomes(report)
    assert got == {"decode": "passed", "chunked-prefill": "passed", "far-decode": "failed",
                   "decode-per-row": "unsupported"}, (got, p.stdout[-3000:])
    assert "the rotation is that of position" in p.stdout, p.stdout[-3000:]


@pytest.mark.parametrize("edit,named", [
    ("            pp = pos[:1].expand_as(pos)\n", "DIV-ROPE-ROW0-POSITIONS"),
    ("            pp = (pos - pos[:, :1] + pos[:1, :1]) if t == 1 else pos\n", "row 1: "),
], ids=["row0-everywhere", "row0-offset-at-decode"])
def test_rows_at_different_positions_keep_their_own_at_decode(tmp_path, edit, named):
    """Every row at row 0's positions (a shared offset), or only on the one-token steps (a batched decode
    that keeps one counter): MODEL-DECODE-PER-ROW fails, naming the rows; the honest model passes."""
    rot = "            qr, kr = self.rope(q, pos), self.rope(k, pos)"
    p, report = _run(tmp_path, _variant(tmp_path, "rows", (rot, edit + rot.replace("pos)", "pp)"))),
                     "-k", "decode-per-row")
    assert _outcomes(report) == {"decode-per-row": "failed"}, p.stdout[-3000:]
    assert named in p.stdout, p.stdout[-3000:]
    honest, report = _run(tmp_path, _variant(tmp_path, "rows_ok"), "-k", "decode-per-row")
    assert _outcomes(report) == {"decode-per-row": "passed"}, honest.stdout[-3000:]


@pytest.mark.parametrize("edit,words", [
    ("pos.clamp(max=255)", "clamped to the last position: 255, 255"),
    ("(pos % 256)", "wrapped (position mod 256): 0, 1, 2, 3"),
], ids=["clamped", "wrapped"])
@pytest.mark.parametrize("slots", [False, True], ids=["position-ids", "cache-slots"])
def test_a_position_past_the_last_one_must_raise(tmp_path, edit, words, slots):
    """A model declaring 256 positions that clamps or wraps past them fails MODEL-POSITION-LIMIT, its probes
    saying which; one that raises there passes; driven by position_ids or by its cache's slots."""
    base = [*SLOTS] if slots else []
    bad = _variant(tmp_path, "wraps", *base, LIMIT[0], (ANGLE, ANGLE.replace("pos[", f"{edit}[")))
    p, report = _run(tmp_path, bad, "-k", "position-limit")
    assert _outcomes(report) == {"position-limit": "failed"}, p.stdout[-3000:]
    assert "gave logits instead of an error" in p.stdout, p.stdout[-3000:]
    if not slots:  # the cache path feeds one token past the end: its one position says little
        assert words in p.stdout, p.stdout[-3000:]
    ok, report = _run(tmp_path, _variant(tmp_path, "raises", *base, *LIMIT), "-k", "position-limit")
    assert _outcomes(report) == {"position-limit": "passed"}, ok.stdout[-3000:]


def test_a_model_raising_before_its_declared_end_fails(tmp_path):
    """max_positions 256 declared, positions from 200 on raise: the last positions it claims fail, named."""
    model = _variant(tmp_path, "short", LIMIT[0], (ANGLE, LIMIT[1][1].replace(">= 256", ">= 200")))
    p, report = _run(tmp_path, model, "-k", "position-limit")
    assert _outcomes(report) == {"position-limit": "failed"}, p.stdout[-3000:]
    assert "the last the model takes" in p.stdout and "IndexError" in p.stdout, p.stdout[-3000:]


def test_generate_without_a_mask_checks_its_positions(tmp_path):
    """A generate that restarts its positions on every step (no mask to count from): MODEL-GENERATE-EQUAL
    fails; the left-padded MODEL-GENERATE stays unsupported for a model without a mask."""
    bug = [("            pos = (full.cumsum(-1) - 1).clip(min=0)[:, -feed.shape[1]:]",
            "            pos = (full.cumsum(-1) - 1).clip(min=0)[:, :feed.shape[1]]")]
    p, report = _run(tmp_path, _variant(tmp_path, "gen_restart", *SLOTS, *bug), "-k", "generate")
    got = _outcomes(report)
    assert got == {"generate": "unsupported", "generate-equal": "failed", "mrope-second-generate": "n/a"}, \
        (got, p.stdout[-3000:])
    assert "positions restart at 0 after the cache" in p.stdout, p.stdout[-3000:]
