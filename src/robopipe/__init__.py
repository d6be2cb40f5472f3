"""robopipe: convert LeRobot v2.1 datasets to v3.0 and benchmark their dataloading."""

from robopipe import forks  # noqa: F401 (registers the fork hooks)

__version__ = "0.1.0"
