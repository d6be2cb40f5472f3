"""Test doubles and stand-in servers: what the tests, ``benchmarks/`` and the console commands
measure with, never reached from the workflow's jobs."""
