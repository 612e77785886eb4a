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
BINS = "synclab_traffic_bins_total"
PEAK = "synclab_traffic_peak_bits_per_second"


def _bin_share(state: str) -> str:
    return (f'sum by (node) (rate({BINS}{{{NODES}, state="{state}"}}[{RATE}]))'
            f" / sum by (node) (rate({BINS}{{{NODES}}}[{RATE}]))")


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
    idle = timeseries_panel(
        "idle 10 ms bins", unit="percentunit", axis_label="share of bins", width=8,
        description="Share of the traffic sampler's 10 ms bins in which the node moved no payload bytes either "
                    "way (P3 Fig. 8/9: the baseline's link idles between bursts).",
        queries=[Query(_bin_share("idle"), "{{node}}")])
    both = timeseries_panel(
        "tx and rx at once", unit="percentunit", axis_label="share of bins", width=8,
        description="Share of 10 ms bins in which the node sent and received at the same time (P3 keeps both "
                    "directions busy; the baseline alternates).",
        queries=[Query(_bin_share("both"), "{{node}}")])
    peak = timeseries_panel(
        "peak 10 ms rate", unit="bps", axis_label="bits/s", width=8,
        description="The highest 10 ms payload rate each node saw since the previous scrape, per direction.",
        queries=[Query(f"max by (node, direction) ({PEAK}{{{NODES}}})", "{{node}} {{direction}}")])
    backends = table_panel(
        "link shaping by node", Query(f"max by (node, role, backend) ({BACKEND}{{{NODES}}})", "{{backend}}"),
        description="The backend each node shapes its link with: netem, htb or tbf in the kernel, app in the "
                    "transport, none when unshaped.")
    return (dashboard("synclab-network", "SyncLab · Network",
                      "Per-node tx/rx at the wire against the configured link rate.")
            .with_panel(per_node).with_panel(cluster_tx).with_panel(cluster_rx).with_panel(utilisation)
            .with_panel(idle).with_panel(both).with_panel(peak).with_panel(backends))
