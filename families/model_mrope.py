"""Family ``model`` (spec/model.yaml): the M-RoPE scenarios (MODEL-MROPE-*), registered by
:mod:`posenc.families.model`, which imports this module after its own scenarios.

Each driver calls a multimodal model the way its clause describes -- a prompt of text, an image and
text; packed image documents; a text-only prompt after an image prompt -- and records the 3-D positions
the clause's rule gives (:func:`mrope_positions`).

Primary sources: Qwen2-VL (arXiv 2409.12191), section 2.1 (M-RoPE); transformers 5.24
``models/qwen2_vl/modeling_qwen2_vl.py`` (``get_rope_index``, ``_prepare_position_ids_for_generation``).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from posenc import families
from posenc.harness.checks import Run, Scenario


#: greedy steps of the generate runs (as MODEL-GENERATE's)
GENERATE_STEPS = 6


def _scenario(clause: str, name: str, **kw):
    def deco(fn):
        families.scenario(Scenario(clause, name, fn, **kw))
        return fn
    return deco


def mrope_positions(segments) -> np.ndarray:
    """MODEL-MROPE-POSITIONS' rule for one row, ``[3, T]`` (temporal, height, width): ``segments``
    are ``("text", n)`` or ``("image", (t, h, w))`` with the image's merged patch grid.  A text
    token's three positions are the running index; an image starts at ``s``, the largest position
    so far + 1, and patch (i, r, c) gets ``(s + i, s + r, s + c)``; whatever follows starts at the
    largest position so far + 1 (Qwen2-VL, section 2.1)."""
    out, start = [], 0
    for kind, x in segments:
        if kind == "text":
            out.append(np.broadcast_to(start + np.arange(x), (3, x)))
        else:
            t, h, w = x
            grid = np.meshgrid(np.arange(t), np.arange(h), np.arange(w), indexing="ij")
            out.append(np.stack([g.ravel() for g in grid]) + start)
        start = int(np.concatenate(out, axis=1).max()) + 1
    return np.concatenate(out, axis=1).astype(np.int64)


def _is_mrope(info: dict) -> Optional[str]:
    if type(info["encodings"].get("mrope")).__name__ != "MRopeParams":
        return "the M-RoPE scenarios apply to models with multimodal RoPE (MRopeParams)"
    return None


def _image_prompt(r: Run, rows: int = 2):
    """Two rows of text (5 tokens), one image (a 1 x 4 x 6 patch grid, merged by the model), text (6):
    ``(input_ids, extra model inputs, [3, B, T] positions by the rule)``."""
    img = r.model.image((1, 4, 6))
    tok, grid = int(img["image_token_id"]), tuple(int(x) for x in img["grid"])
    n = grid[0] * grid[1] * grid[2]
    seqs = [np.concatenate([r.tokens(1, 5)[0], np.full(n, tok), r.tokens(1, 6)[0]]) for _ in range(rows)]
    ids = np.stack(seqs)
    p3 = mrope_positions([("text", 5), ("image", grid), ("text", 6)])
    extra = {"pixel_values": np.concatenate([np.asarray(img["pixel_values"])] * rows),
             "image_grid_thw": np.asarray([img["image_grid_thw"]] * rows, np.int64),
             "mm_token_type_ids": (ids == tok).astype(np.int64)}
    return ids, extra, np.broadcast_to(p3[:, None], (3, rows, p3.shape[1])).copy()


@_scenario("MODEL-MROPE-POSITIONS", "mrope-positions", kinds=("decoder",), needs=("images", "generate"),
           applies=_is_mrope, implies=("MROPE-SECTIONS",))
def _mrope_positions(r: Run) -> None:
    ids, extra, p3 = _image_prompt(r)
    prompt, _ = r.forward("image prompt", input_ids=ids, positions=p3[0], mrope=p3, **extra)
    mask = np.ones_like(ids)
    with_cache = r.generate("generate with a cache", ids, mask, GENERATE_STEPS, use_cache=True, mrope=p3, **extra)
    without = r.generate("generate without a cache", ids, mask, GENERATE_STEPS, use_cache=False, mrope=p3, **extra)
    r.same_steps("generate with a cache == without (step logits)", with_cache, without, [0, 1])
    r.same("generate's step 0 == the forward pass of the image prompt", with_cache[1][:, 0], prompt[:, -1],
           [f"row {b} position {ids.shape[1] - 1}" for b in range(2)])


#: MODEL-MROPE-PACKED's documents: (text, image patch grid, text); grids merged 2 x 2 by the model
MROPE_DOCS = ((3, (1, 4, 6), 4), (5, (1, 4, 4), 3))


@_scenario("MODEL-MROPE-PACKED", "mrope-packed", kinds=("decoder",), needs=("images", "position_ids"), applies=_is_mrope,
           implies=("POS-PACKED", "MROPE-SECTIONS"))
def _mrope_packed(r: Run) -> None:
    docs, p3s, images = [], [], []
    for before, patches, after in MROPE_DOCS:
        img = r.model.image(patches)
        tok, grid = int(img["image_token_id"]), tuple(int(x) for x in img["grid"])
        docs.append(np.concatenate([r.tokens(1, before)[0], np.full(int(np.prod(grid)), tok), r.tokens(1, after)[0]]))
        p3s.append(mrope_positions([("text", before), ("image", grid), ("text", after)]))
        images.append(img)
    cu = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
    ids = np.concatenate(docs)[None]
    p3 = np.concatenate(p3s, axis=1)[:, None]  # [3, 1, T]: each document's M-RoPE positions, from 0

    def inputs(which, token_ids):
        return {"pixel_values": np.concatenate([np.asarray(images[d]["pixel_values"]) for d in which]),
                "image_grid_thw": np.asarray([images[d]["image_grid_thw"] for d in which], np.int64),
                "mm_token_type_ids": (token_ids == tok).astype(np.int64)}
    logits, _ = r.forward("packed image documents", input_ids=ids, position_ids=p3, positions=p3[0], mrope=p3,
                          documents=cu.tolist(), **inputs(range(len(docs)), ids))
    for d, doc in enumerate(docs):
        alone, _ = r.forward(f"image document {d} alone", input_ids=doc[None], positions=p3s[d][:1], mrope=p3s[d][:, None],
                             **inputs([d], doc[None]))
        r.same(f"image document {d} in the pack == document {d} alone", logits[0, cu[d]:cu[d + 1]], alone[0],
               [f"document {d} position {t}" for t in range(len(doc))])


@_scenario("MODEL-MROPE-SECOND-GENERATE", "mrope-second-generate", kinds=("decoder",), needs=("images", "generate", "cache"),
           applies=_is_mrope, implies=("MROPE-SECTIONS",))
def _mrope_second_generate(r: Run) -> None:
    p, n = 12, GENERATE_STEPS
    text = r.tokens(2, p + n)
    mask = np.ones((2, p), np.int64)
    plain = lambda length, start=0: np.broadcast_to(start + np.arange(length), (3, 2, length)).copy()  # noqa: E731
    before = r.generate("text-only generate before any image", text[:, :p], mask, n, use_cache=True, mrope=plain(p))
    ref, _ = r.forward("text-only prefill of all tokens before any image", input_ids=text, positions=plain(p + n)[0],
                       mrope=plain(p + n))
    ids, extra, p3 = _image_prompt(r)
    for how in ("forward passes", "generate"):  # each right after an image prompt
        r.generate(f"image prompt generate (before the text-only {how})", ids, np.ones_like(ids), n, use_cache=True,
                   mrope=p3, **extra)
        if how == "generate":
            after = r.generate("text-only generate after the image prompt", text[:, :p], mask, n, use_cache=True,
                               mrope=plain(p))
            r.same_steps("text-only generate after the image prompt == before any image", after, before, [0, 1])
            continue
        _, cache = r.forward("text-only prefill after the image prompt", input_ids=text[:, :p], use_cache=True,
                             positions=plain(p)[0], mrope=plain(p))
        for s in range(n):
            step, cache = r.forward(f"text-only decode step {s} after the image prompt",
                                    input_ids=text[:, p + s:p + s + 1], cache=cache, use_cache=True,
                                    positions=plain(1, p + s)[0], mrope=plain(1, p + s), cache_length=p + s)
            r.same(f"text-only decode step {s} after the image prompt == one prefill at position {p + s}", step[:, 0],
                   ref[:, p + s], [f"row {b} position {p + s}" for b in range(2)])
