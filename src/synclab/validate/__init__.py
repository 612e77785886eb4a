"""Validating the simulator against the emulator (layer 7): the grid of points both run
(:mod:`~synclab.validate.grid`), two validations compared (:mod:`~synclab.validate.compare`), and the results
page made from the checked-in records (:mod:`~synclab.validate.doc`). ``synclab validate`` runs them."""
