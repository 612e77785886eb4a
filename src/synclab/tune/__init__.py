"""``synclab tune``: Bayesian search of numeric spec keys on the simulator, the best points confirmed on the emulator.

:mod:`synclab.tune.space` turns ``KEY=LOW:HIGH[:log]`` into typed search dimensions (any int or float key of
the spec, a strategy's own options included, read from the pydantic models); :mod:`synclab.tune.search` runs
the seeded search over any objective; :mod:`synclab.tune.job` puts them together (the simulator as the
objective, ``synclab run`` as the confirmation) and writes ``tune.json`` and ``tune.png``.
"""

from synclab.tune.space import Param, TuneError, parse_param, resolve_params

__all__ = ["Param", "TuneError", "parse_param", "resolve_params"]
