"""Experiment specs: typed, validated at the edge, defaults in one place."""

from synclab.config.load import Override, load_spec, parse_override, parse_spec
from synclab.config.spec import Spec, SpecError

__all__ = ["Override", "Spec", "SpecError", "load_spec", "parse_override", "parse_spec"]
