"""Network emulation: link profiles, tc shaping backends (netem | htb/tbf | app), netns isolation.

* :mod:`synclab.netem.profile` — finding, loading and listing profile files (the schema,
  :class:`~synclab.linkprofile.LinkProfile`, is :mod:`synclab.linkprofile`);
* :mod:`synclab.netem.dilation` — the link a host shapes under ``run.dilation``;
* :mod:`synclab.netem.reshape` — what each backend can change while a job runs;
* :mod:`synclab.netem.tc` — backend detection/choice, tc command builders, apply/clear/read-back;
* :mod:`synclab.netem.netns` — :class:`Topology` (data) and :class:`NetnsCluster` (builds it);
* :mod:`synclab.netem.bench` — bulk-transfer goodput (TCP sockets, iperf3);
* :mod:`synclab.netem.cli` — ``profiles`` and ``cleanup`` command logic.

This package knows nothing of training.
"""

from synclab.linkprofile import LinkProfile, ProfileError, resolve_for_role
from synclab.netem.profile import list_profiles, load_profile

__all__ = ["LinkProfile", "ProfileError", "list_profiles", "load_profile", "resolve_for_role"]
