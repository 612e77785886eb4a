"""Network dashboard: wire-level tx/rx of every node against its configured link rate (P3 Fig. 8/9).

The traffic comes from the interface counters (/sys/class/net, like bwm-ng in P3),
so it includes TCP/IP and gRPC framing: what the shaped link actually carries.
"""

from __future__ import annotations

from synclab.dashboards.panels import NODES, RATE, Query, capacity_line, dashboard, table_panel, timeseries_panel

TX = "synclab_interface_transmit_bytes_total"
RX = "synclab_interface_receive_bytes_total"
LINK_RATE = "synclab_link_rate_bits_per_second"
BACKEND = "synclab_network_backend_info"


def build():
    per_node = (timeseries_panel(
        "tx / rx — $node", unit="bps", axis_label="bits/s", width=24, height=7,
        description="Bits per second on the node's interfaces (wire level); the dashed line is the "
                    "configured link rate of the profile the node applied.",
        queries=[
            Query(f'sum by (node) (rate({TX}{{node="$node"}}[{RATE}])) * 8', "tx"),
            Query(f'sum by (node) (rate({RX}{{node="$node"}}[{RATE}])) * 8', "rx"),
            Query(f'max by (node, direction) ({LINK_RATE}{{node="$node"}})', "link rate {{direction}}"),
        ])
        .repeat("node").repeat_direction("h").max_per_row(2))
    per_node = capacity_line(per_node, "link rate.*")
    cluster_tx = timeseries_panel(
        "tx by node", unit="bps", axis_label="bits/s", width=12,
        description="Every selected node's transmit rate on one axis.",
        queries=[Query(f"sum by (node) (rate({TX}{{{NODES}}}[{RATE}])) * 8", "{{node}}")])
    cluster_rx = timeseries_panel(
        "rx by node", unit="bps", axis_label="bits/s", width=12,
        description="Every selected node's receive rate on one axis.",
        queries=[Query(f"sum by (node) (rate({RX}{{{NODES}}}[{RATE}])) * 8", "{{node}}")])
    utilisation = timeseries_panel(
        "egress utilisation", unit="percentunit", axis_label="tx / link rate", width=24, height=6,
        description="Transmit rate divided by the configured egress rate (nodes whose link is shaped).",
        queries=[Query(f"sum by (node) (rate({TX}{{{NODES}}}[{RATE}])) * 8"
                       f' / on (node) max by (node) ({LINK_RATE}{{{NODES}, direction="egress"}})', "{{node}}")])
    backends = table_panel(
        "link shaping by node", Query(f"max by (node, role, backend) ({BACKEND}{{{NODES}}})", "{{backend}}"),
        description="The backend each node shapes its link with: netem, htb or tbf in the kernel, app in the "
                    "transport, none when unshaped.")
    return (dashboard("synclab-network", "SyncLab · Network",
                      "Per-node tx/rx at the wire against the configured link rate.")
            .with_panel(per_node).with_panel(cluster_tx).with_panel(cluster_rx).with_panel(utilisation)
            .with_panel(backends))
