"""Extraction on write: sentences, entities and cause->effect relations from item text."""
