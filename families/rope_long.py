"""Golden cases at long positions (issue 30, part 4): RoPE and its sequence-dependent scalings at 2^24 and
at int32's largest position, and through the one-offset form where the frequencies depend on the sequence
length (dynamic NTK, LongRoPE's switch).  M-RoPE's and T5's are in their families' files.

At these positions the float32 angle term of the tolerance rule stops constraining the highest
frequencies (``spec.tolerance.not_checkable``, counted by the run); the lower frequencies stay checkable,
and they are what a wrapped int32 position, a dropped offset or frequencies taken from the wrong length
change.
"""

from __future__ import annotations

from posenc.families import Case, Gen, pos
from posenc.spec.models import RopeParams
from posenc.spec.registry import model_params

from . import add_cases, rope_clauses  # noqa: F401 - rope_clauses registers the rope.* clause rule

_LLAMA31 = model_params("llama-3.1-8b")
_LONGROPE = model_params("phi-3.5-mini")
_DYN = RopeParams(head_dim=64, rope_theta=10000.0, rope_type="dynamic", factor=2.0, max_position_embeddings=4096)
_P24 = 2**24
_I32 = 2**31 - 1
add_cases(
    Case("rope-position-2-24", "rope.apply", ("ROPE-ANGLE", "SCALE-LLAMA3"), _LLAMA31,
         {"q": Gen((2, 2, 4, 128)), "k": Gen((2, 1, 4, 128)), "position_ids": pos(*[range(_P24 - 2, _P24 + 2)] * 2)},
         "Llama 3.1 (llama3 scaling) at positions 2**24 - 2 .. 2**24 + 1 in two rows: float32 holds every one of them "
         "exactly up to 2**24, not past it; the highest frequencies are not checkable there, the rest are"),
    Case("rope-int32-max", "rope.apply", ("ROPE-ANGLE", "ROPE-PAIR-HALF"), RopeParams(head_dim=64, rope_theta=500000.0),
         {"q": Gen((1, 2, 3, 64)), "k": Gen((1, 1, 3, 64)), "position_ids": pos(range(_I32 - 2, _I32 + 1))},
         "positions 2**31 - 3 .. 2**31 - 1, the largest int32 holds: an index type or a position product that "
         "wraps (a kernel keeping 21 bits, pos * 1024 in int32) turns the low frequencies to other angles"),
    Case("rope-offset-dynamic", "rope.apply", ("SCALE-DYNAMIC-NTK", "SCALE-DYNAMIC-PER-CALL", "ROPE-ANGLE"), _DYN,
         {"q": Gen((2, 2, 3, 64)), "k": Gen((2, 1, 3, 64)), "position_ids": pos(*[range(6000, 6003)] * 2)},
         "three tokens after a cache of 6000 in two rows (one offset): dynamic NTK's theta' comes from seq_len "
         "6003, not from the 3 tokens of the call"),
    Case("rope-offset-longrope", "rope.apply", ("SCALE-LONGROPE-FACTORS", "ROPE-ANGLE"), _LONGROPE,
         {"q": Gen((2, 2, 2, 96)), "k": Gen((2, 1, 2, 96)), "position_ids": pos(*[range(5000, 5002)] * 2)},
         "Phi-3.5-mini two tokens after a cache of 5000 (one offset): LongRoPE's long factors (seq_len 5002 > "
         "original 4096), not the short ones the call's 2 tokens would pick"),
)
