"""Training copies of a v3.0 dataset in other representations (codecs, JPEG images, raw
arrays, resized), each still a LeRobot v3.0 dataset, and what each costs: size, encode
time, fidelity. ``robopipe.copies.encodings`` names them; the workflow runs one job per
output file (``copy_file``) and one that assembles the copy (``copy_finish``), both in
``robopipe.copies.make``.

The package imports nothing itself: the Snakefile reads ``encodings`` at parse time and must
not pay for torch and the decoders."""
