"""Reasoning over the memory graph: discover, trace, causal chains, what-if."""
