"""Benchmarks (`mcpbench bench NAME`): speed targets, measured, written under results/bench/."""
