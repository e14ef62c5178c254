"""Masking, batching, prediction, the sweep engine, attention maps and statistics: no model files, no data files."""
