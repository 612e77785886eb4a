"""``synclab simulate``: a discrete-event simulation (SimPy) of the spec ``synclab run`` takes.

Same model profiles, same plans (the strategies' own planning code), same link profiles;
NICs are shared resources (max-min fair flows), links are per-destination FIFO/priority
queues, every message pays a start-up cost a. Collectives are sequences of messages.
Writes the run-record subset ``synclab report`` reads, marked ``"simulated": true``.

- :mod:`~synclab.sim.network`: NICs and fluid flows (the fabric); :mod:`~synclab.sim.link`: senders' queues;
  :mod:`~synclab.sim.host`: the emulator's host (opt-in).
- :mod:`~synclab.sim.nodes`: the cluster, the ring all-reduce, the comm thread, replayed compute and gates.
- :mod:`~synclab.sim.strategies`: the stock strategy models (ring, PS in every server mode, scheduled pulls).
- :mod:`~synclab.sim.split_roles`: CONV and FC workers (Stanza), their messages, recursive doubling.
- :mod:`~synclab.sim.api`: what a strategy's own simulator model (``OwnModel``) may use.
- :mod:`~synclab.sim.run`: :func:`simulate`, a spec in, a :class:`SimResult` out.
- :mod:`~synclab.sim.records`: the run records and the sweep CSV/PNG.
"""
