"""Readers and writers of the LeRobot dataset formats, named after format and version."""
