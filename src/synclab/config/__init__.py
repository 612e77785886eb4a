"""Experiment specs: typed, validated at the edge, defaults in one place."""

from synclab.config.spec import Spec, SpecError, load_spec, parse_spec

__all__ = ["Spec", "SpecError", "load_spec", "parse_spec"]
