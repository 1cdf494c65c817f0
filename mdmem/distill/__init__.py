"""Turning sessions into less text: compaction, fact extraction, and the rules and LLM calls
they share."""
