"""The agent's system prompt and tool description, kept as package data (byte-stable)."""
