"""Experiment specs: typed, validated at the edge, defaults in one place."""

from synclab.config.spec import Override, Spec, SpecError, load_spec, parse_override, parse_spec

__all__ = ["Override", "Spec", "SpecError", "load_spec", "parse_override", "parse_spec"]
