"""Talking to Pedelec Desktop's Core over `pedelec-core-ipc-v1` (spec section 3)."""
