"""Dataloading benchmarks: scenarios, the registry of loaders (robopipe and peers), measurement."""
