"""Scheduler dashboard: the send queues (by priority band), application bytes by kind and peer,
and how long PS shards take to aggregate (P3's priority scheduling made visible)."""

from __future__ import annotations

from synclab.dashboards.panels import NODES, WINDOW, Query, dashboard, timeseries_panel

QUEUE = "synclab_send_queue_bytes"
SENT = "synclab_bytes_sent_total"
RECEIVED = "synclab_bytes_received_total"
AGGREGATION = "synclab_ps_aggregation_seconds"


def build():
    queue = timeseries_panel(
        "send-queue depth by priority band", unit="bytes", axis_label="queued bytes", stack=True,
        description="Bytes waiting in each node's send queues, summed over peers, by priority band "
                    "(band 0 = most urgent: the layers the next forward pass needs first).",
        queries=[Query(f"sum by (node, priority_band) ({QUEUE}{{{NODES}}})", "{{node}} band {{priority_band}}")])
    by_kind = timeseries_panel(
        "bytes sent by kind", unit="Bps", axis_label="bytes/s", stack=True,
        description="Application bytes handed to the transport, by message kind (gradients, parameters, ...).",
        queries=[Query(f"sum by (kind) (rate({SENT}{{{NODES}}}[{WINDOW}]))", "{{kind}}")])
    by_peer = timeseries_panel(
        "bytes sent by node → peer", unit="Bps", axis_label="bytes/s",
        description="Application bytes per sender and destination.",
        queries=[Query(f"sum by (node, peer) (rate({SENT}{{{NODES}}}[{WINDOW}]))", "{{node}} → {{peer}}")])
    received = timeseries_panel(
        "bytes received by node ← peer", unit="Bps", axis_label="bytes/s",
        description="Application bytes per receiver and source.",
        queries=[Query(f"sum by (node, peer) (rate({RECEIVED}{{{NODES}}}[{WINDOW}]))", "{{node}} ← {{peer}}")])
    aggregation = timeseries_panel(
        "PS aggregation latency", unit="s", axis_label="seconds",
        description="From a slice's first push to its update being applied on the shard (p50, p99).",
        queries=[
            Query(f"histogram_quantile(0.5, sum by (le, node) (rate({AGGREGATION}_bucket{{{NODES}}}[{WINDOW}])))",
                  "p50 {{node}}"),
            Query(f"histogram_quantile(0.99, sum by (le, node) (rate({AGGREGATION}_bucket{{{NODES}}}[{WINDOW}])))",
                  "p99 {{node}}"),
        ])
    return (dashboard("synclab-scheduler", "SyncLab · Scheduler",
                      "Send queues by priority band, bytes by kind and peer, PS aggregation latency.")
            .with_panel(queue).with_panel(aggregation).with_panel(by_kind).with_panel(by_peer)
            .with_panel(received))
