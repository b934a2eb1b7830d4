"""Reads that rank: hybrid (vector + full text, fused by RRF), vector-only, keyword-only."""
