"""Reproducing the papers' figures: targets as data (experiments/reproduce/*.yaml), one sweep runner,
verdicts per claim, and docs/results/reproduction.md generated from them (DESIGN.md, "the next layers")."""
