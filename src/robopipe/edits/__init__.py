"""Edits of v3.0 datasets (lerobot-edit-dataset's operations: delete_episodes, split, merge,
remove_feature)
as one job per output file, by stream copy: plan, files, meta, validate, serial."""
