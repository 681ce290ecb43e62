"""What a probe can and cannot show: layer-by-layer probes with a scalar mix, control tasks, description length and
amnesic probing (issue 56). records.py holds the records every floor above reads."""
