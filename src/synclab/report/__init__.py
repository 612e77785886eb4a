"""Tables and plots of a run, computed only from its run-record files (DESIGN.md "Run records").

- :mod:`~synclab.report.records`: :func:`load_run` and the typed rows it returns.
- :mod:`~synclab.report.summary`: :func:`compute_summary`, the figures of ``summary.json``.
- :mod:`~synclab.report.table`: :func:`summary_table` for the terminal.
- :mod:`~synclab.report.plots`: PNG figures and :func:`write_report`.
"""

from synclab.report.plots import plot_comp_comm, plot_loss, plot_throughput, plot_traffic, write_report
from synclab.report.records import ITERATION_COLUMNS, IterationRow, RunRecords, TrafficTrace, load_run
from synclab.report.summary import compute_summary
from synclab.report.table import summary_table

__all__ = ["ITERATION_COLUMNS", "IterationRow", "RunRecords", "TrafficTrace", "compute_summary", "load_run",
           "plot_comp_comm", "plot_loss", "plot_throughput", "plot_traffic", "summary_table", "write_report"]
