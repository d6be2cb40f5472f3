"""What is wrong with a dataset, every problem at once, before anything is converted.

One interface for every check (:mod:`robopipe.checks.report`): a ``Problem`` per thing wrong,
named with its episode and file, a ``CheckReport`` of them written as ``check.json``, its
one-line messages on the terminal, and ``SourceCheckError`` (a job's non-zero exit) when it
refuses. The checks: a v2.1 source (:mod:`~robopipe.checks.v21`, its episodes'
files in :mod:`~robopipe.checks.v21_episode`, checked in parts: :mod:`~robopipe.checks.parts`),
a v3.0 dataset (:mod:`~robopipe.checks.v30`; its data and video files:
:mod:`~robopipe.checks.v30_data`, :mod:`~robopipe.checks.v30_videos`) and the outside doctor
(:mod:`~robopipe.checks.doctor`); with the shared pieces: LeRobot's column and timestamp rules
(:mod:`~robopipe.checks.rules`), cameras' streams (:mod:`~robopipe.checks.streams`), the
files a source holds (:mod:`~robopipe.checks.files`) and its changes since the last check
(:mod:`~robopipe.checks.changes`).
"""
