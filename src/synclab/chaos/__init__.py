"""Fault injection: run a job, break one of its parts mid-run, and record what the job did about it.

``synclab chaos SPEC --fault F`` runs the spec twice: once undisturbed, once with the fault ``F``
(:mod:`synclab.chaos.faults`) injected half-way, both with ``run.restart: on-failure`` and, where the
strategy is checkpointable, ``run.checkpoint_every``. A cell of the fault matrix (:mod:`synclab.chaos.cell`)
passes when the faulted job either ends ``ok`` with parameters bit-identical to the undisturbed run's and
every (worker, iteration) reported once, or fails within the heartbeat timeout with ``status.json`` naming
the fault; and, either way, leaves no process or network namespace behind. ``--matrix`` runs every fault
on one strategy of each family (:mod:`synclab.chaos.matrix`) and writes one record per cell, from which
``docs/results/fault-matrix.md`` is generated (:mod:`synclab.chaos.doc`).
"""
