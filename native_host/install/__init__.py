"""Registering the host with Chromium-based browsers.

Where browsers look (`locations`, with the sandboxed builds), what is written
(`contents`, `flatpak`), deciding and applying it (`plan`, `installer`), the record of it
and its undoing (`record`, `uninstall`), the Windows registry (`registry`), whether the
interpreter will last (`interpreter`), managed browser policies (`managed_policy`), the
command line (`cli`) and the diagnosis (`doctor/`).

Nothing here is imported in relay mode.
"""
