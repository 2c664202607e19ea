"""Test support shared by several test modules (not tests themselves)."""
