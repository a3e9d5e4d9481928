"""The reference with a bug outside the toy's catalogue (the ramp at twice its slope): no divergence
reproduces it, so a run must fail with what the toy's registered inference model says it is."""

from posenc.adapters import ReferenceAdapter


class SlopeDoubled(ReferenceAdapter):
    name = "toy-slope-doubled"

    def toy_ramp(self, position_ids, params, *, dtype, device):
        return super().toy_ramp(position_ids, params.model_copy(update={"slope": 2 * params.slope}),
                                dtype=dtype, device=device)


ADAPTER = SlopeDoubled
