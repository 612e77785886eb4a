"""Reproducing the papers' figures: targets as data (synclab/reproduce/targets/*.yaml), one sweep runner,
verdicts per claim, and docs/results/reproduction.md generated from them (DESIGN.md, "the next layers")."""
