"""The generated pages, registered in the order ``synclab docs`` writes them (one line each; see
:mod:`synclab.docsgen` for how to add one). The command-line reference is registered by
:mod:`synclab.cli.docs`, the one module that holds the command tree."""

from __future__ import annotations

from synclab.calibrate import gpu_check
from synclab.chaos import doc as fault_matrix
from synclab.docsgen import (
         accuracy,
         env_ref,
         metrics_ref,
         profiles_ref,
         readme,
         register,
         register_many,
         results,
         spec_ref,
         wire_ref,
)
from synclab.reproduce import heldout
from synclab.tune import doc as tuning
from synclab.validate import doc as validation

register("docs/reference/spec.md", spec_ref.render)
register("docs/reference/metrics.md", metrics_ref.render)
register("docs/reference/profiles.md", profiles_ref.render)
register("docs/reference/environment.md", env_ref.render)
register("docs/reference/wire.md", wire_ref.render)
register_many(results.verdict_pages)  # docs/reproduction/*/verdict.json, before the pages built from them
register("docs/results/reproduction.md", results.reproduction_page)
register("docs/results/calibration-check.md", heldout.page, command="synclab reproduce --calibration-check")
register("docs/results/validation.md", validation.render, command="synclab validate doc")
register("docs/results/fault-matrix.md", fault_matrix.page, command=fault_matrix.COMMAND)
register("docs/results/gpu-check.md", gpu_check.page)  # from docs/gpu/gpu-check.json (synclab calibrate gpu-check)
register(accuracy.PAGE, accuracy.render)  # from docs/results/accuracy/accuracy.json (studies/accuracy_digits.py)
register("docs/results/tuning.md", tuning.page)  # from docs/tuning/*/tune.json (synclab tune)
register("README.md", readme.render)  # its generated blocks only; last: they summarize the pages above
