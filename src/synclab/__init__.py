"""SyncLab: an emulated GPU-cluster testbed for parameter-synchronization strategies."""

__version__ = "0.1.0"
