"""Integrations: the interfaces agents and their frameworks reach mdmem through."""
