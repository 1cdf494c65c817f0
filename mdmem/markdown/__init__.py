"""Markdown as mdmem reads and edits it: one parser, entries with their metadata, and
line-exact edits that leave every other byte alone."""
