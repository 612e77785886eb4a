"""``synclab stragglers``: how much each strategy loses to one slow worker, on the simulator (:mod:`.sweep`)."""
