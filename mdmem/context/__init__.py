"""The memory section of a prompt: sources, packed into a token budget."""
