"""Network emulation: link profiles, tc shaping backends (netem | htb/tbf | app), netns isolation.

* :mod:`synclab.netem.profile` — :class:`LinkProfile`, loading and listing profile files;
* :mod:`synclab.netem.tc` — backend detection/choice, tc command builders, apply/clear/read-back;
* :mod:`synclab.netem.netns` — :class:`Topology` (data) and :class:`NetnsCluster` (builds it);
* :mod:`synclab.netem.bench` — bulk-transfer goodput (TCP sockets, iperf3);
* :mod:`synclab.netem.cli` — ``profiles`` and ``cleanup`` command logic.

This package knows nothing of training.
"""

from synclab.netem.profile import LinkProfile, ProfileError, list_profiles, load_profile, resolve_for_role

__all__ = ["LinkProfile", "ProfileError", "list_profiles", "load_profile", "resolve_for_role"]
