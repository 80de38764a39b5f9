"""Benchmarks: `make bench`. Figures are printed as ratios against a baseline run alongside."""
