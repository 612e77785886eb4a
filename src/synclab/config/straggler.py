"""``cluster.straggler``: random slow-worker episodes, a spec section of its own."""

from __future__ import annotations

from pydantic import Field

from synclab.config.section import Section


class StragglerSpec(Section):
    """Random straggler episodes (:mod:`synclab.compute.stragglers`): at each iteration a worker not already
    straggling starts an episode with ``probability``; its compute then takes ``factor`` times longer for
    ``duration`` iterations. Seeded by ``run.seed`` and the rank (the emulator and the simulator draw the
    same episodes)."""

    probability: float = Field(0.0, ge=0, le=1, description="chance per worker per iteration that an episode "
                                                              "starts (0: no random stragglers)")
    factor: float = Field(2.0, ge=1, le=100, description="compute time multiplier during an episode")
    duration: int = Field(1, ge=1, description="iterations an episode lasts")
