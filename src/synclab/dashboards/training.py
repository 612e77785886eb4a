"""Training dashboard: iteration time, throughput, loss, and computation vs non-overlapped
communication per iteration (MG-WFBP Fig. 8/9)."""

from __future__ import annotations

from synclab.dashboards.panels import NODES, WINDOW, Query, dashboard, timeseries_panel

ITERATION = "synclab_iteration_seconds"
SAMPLES = "synclab_samples_total"
LOSS = "synclab_training_loss"
COMPUTE = "synclab_compute_seconds_total"
COMM_WAIT = "synclab_comm_wait_seconds_total"


def build():
    iteration = timeseries_panel(
        "iteration time", unit="s", axis_label="seconds / iteration",
        description="Median and 99th percentile of the iteration time over the selected workers, "
                    "and each worker's mean.",
        queries=[
            Query(f"histogram_quantile(0.5, sum by (le) (rate({ITERATION}_bucket{{{NODES}}}[{WINDOW}])))", "p50"),
            Query(f"histogram_quantile(0.99, sum by (le) (rate({ITERATION}_bucket{{{NODES}}}[{WINDOW}])))", "p99"),
            Query(f"sum by (node) (rate({ITERATION}_sum{{{NODES}}}[{WINDOW}]))"
                  f" / sum by (node) (rate({ITERATION}_count{{{NODES}}}[{WINDOW}]))", "mean {{node}}"),
        ])
    throughput = timeseries_panel(
        "throughput", unit="suffix: samples/s", axis_label="samples/s",
        description="Training samples per second: the cluster's total and each worker's share.",
        queries=[
            Query(f"sum (rate({SAMPLES}{{{NODES}}}[{WINDOW}]))", "cluster"),
            Query(f"sum by (node) (rate({SAMPLES}{{{NODES}}}[{WINDOW}]))", "{{node}}"),
        ])
    loss = timeseries_panel(
        "training loss", unit="none", axis_label="loss", min_zero=False,
        description="The loss of each worker's latest mini-batch.",
        queries=[Query(f"max by (node) ({LOSS}{{{NODES}}})", "{{node}}")])
    breakdown = timeseries_panel(
        "computation vs non-overlapped communication", unit="s", axis_label="seconds / iteration",
        stack=True, bars=True,
        description="Per iteration: time spent computing and time the worker waited for communication "
                    "that did not overlap with computation (MG-WFBP Fig. 8).",
        queries=[
            Query(f"sum (rate({COMPUTE}{{{NODES}}}[{WINDOW}])) / sum (rate({ITERATION}_count{{{NODES}}}[{WINDOW}]))",
                  "computation"),
            Query(f"sum (rate({COMM_WAIT}{{{NODES}}}[{WINDOW}])) / sum (rate({ITERATION}_count{{{NODES}}}[{WINDOW}]))",
                  "non-overlapped communication"),
        ])
    return (dashboard("synclab-training", "SyncLab · Training",
                      "Iteration time, throughput, loss and the computation/communication split.")
            .with_panel(iteration).with_panel(throughput).with_panel(breakdown).with_panel(loss))
