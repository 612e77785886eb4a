"""Measuring the inputs ``synclab simulate`` reads (layer 7; ``synclab calibrate``): the ring's goodput share
(:mod:`~synclab.calibrate.ring_goodput`), a PS shard's CPU per value (:mod:`~synclab.calibrate.shard_cpu`), the
all-reduce start-up against dilation (:mod:`~synclab.calibrate.startup`) and the worker runtime's host time
per tensor (:mod:`~synclab.calibrate.tensor_cost`). Each measures this host, on the emulator's own code."""
