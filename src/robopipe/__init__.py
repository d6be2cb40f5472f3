"""robopipe: convert LeRobot v2.1 datasets to v3.0 and benchmark their dataloading."""

__version__ = "0.1.0"
