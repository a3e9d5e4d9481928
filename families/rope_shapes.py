"""Golden cases at the shapes kernels special-case (issue 30, part 4): the head sizes 80, 92, 112, 160 and
192 (vLLM, SGLang and FlashInfer take another kernel outside 64 / 128 / 256), 73 query heads and batches of
2**k + 1 (a block's tail, a grid that does not divide).  The generated cases draw these too, but a few
examples per run reach a given size only by chance; a golden per size reaches every one on every run, and
through every call form the adapter serves."""

from __future__ import annotations

from posenc.families import Case, Gen, pos
from posenc.spec.models import RopeParams

from . import add_cases, rope_clauses  # noqa: F401 - rope_clauses registers the rope.* clause rule


def _rows(b: int, t: int, start: int) -> list:
    """``b`` rows of ``t`` consecutive positions, row r from ``start + 37 r`` (every row its own offset)."""
    return [range(start + 37 * r, start + 37 * r + t) for r in range(b)]


add_cases(
    Case("rope-head-80", "rope.apply", ("ROPE-PAIR-HALF", "ROPE-ANGLE"), RopeParams(head_dim=80, rope_theta=10000.0),
         {"q": Gen((1, 73, 1, 80)), "k": Gen((1, 1, 1, 80)), "position_ids": pos([4093])},
         "head 80 (a size kernels special-case), 73 query heads and one key head"),
    Case("rope-head-92", "rope.apply", ("ROPE-PAIR-INTERLEAVED", "ROPE-ANGLE"),
         RopeParams(head_dim=92, rope_theta=500000.0, pairing="interleaved"),
         {"q": Gen((5, 2, 2, 92)), "k": Gen((5, 1, 2, 92)), "position_ids": pos(*_rows(5, 2, 65534))},
         "head 92: 46 interleaved pairs, not a multiple of any vector width; batch 5 = 2**2 + 1"),
    Case("rope-head-112", "rope.apply", ("ROPE-PAIR-HALF", "ROPE-ANGLE", "ROPE-PARTIAL"),
         RopeParams(head_dim=112, rotary_dim=56, rope_theta=1000000.0),
         {"q": Gen((2, 2, 2, 112)), "k": Gen((2, 1, 2, 112)), "position_ids": pos(*_rows(2, 2, 1000))},
         "head 112 with half of it rotating (rotary 56: 28 half pairs)"),
    Case("rope-head-160", "rope.apply", ("ROPE-PAIR-INTERLEAVED", "ROPE-ANGLE"),
         RopeParams(head_dim=160, rope_theta=10000.0, pairing="interleaved"),
         {"q": Gen((9, 1, 1, 160)), "k": Gen((9, 1, 1, 160)), "position_ids": pos(*_rows(9, 1, 0))},
         "head 160, batch 9 = 2**3 + 1"),
    Case("rope-head-192", "rope.apply", ("ROPE-PAIR-HALF", "ROPE-ANGLE", "ROPE-PARTIAL"),
         RopeParams(head_dim=192, rotary_dim=64, rope_theta=10000.0),
         {"q": Gen((2, 2, 2, 192)), "k": Gen((2, 1, 2, 192)), "position_ids": pos(*_rows(2, 2, 131000))},
         "head 192 with a 64-wide rotary part (DeepSeek's MLA query head: 128 nope + 64 rope)"),
)
