"""Synthetic sources: the global, DAS and crustal generators."""
