"""Converters from other tools' recordings into episode parquet (and out again)."""
