"""Core training pieces (placeholder until training-core merges)."""
