"""Registering the host with Chromium-based browsers: where (`locations`), how
(`installer`), the command line (`cli`) and the diagnosis (`doctor`).

Nothing here is imported in relay mode.
"""
