"""The runtime renderer of the dashboards: draw them from Prometheus without Grafana (``synclab dashboards render``).

Apart from the build-time generator (:mod:`synclab.dashboards`, which writes the
Grafana JSON from code), this package only reads that JSON:

* :mod:`.model` reads a dashboard file into typed objects (panels, targets, overrides, variables);
* :mod:`.query` asks a :class:`~.query.Source` (a live :class:`~.prometheus.Prometheus`, or saved answers)
  the dashboard's own queries, the way Grafana would, and returns a :class:`~.query.Snapshot`;
* :mod:`.saved` writes a snapshot's answers to CSV and JSON and answers from that JSON again later;
* :mod:`.figure` draws a snapshot as one PNG laid out like the dashboard (:mod:`.layout`: Grafana's grid).
"""
