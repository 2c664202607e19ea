"""The test extension's id is fixed by its manifest `key` (no browser needed)."""

from __future__ import annotations

import json

import pytest

from tests.e2e import harness

pytestmark = pytest.mark.unit


def test_extension_id_matches_manifest_key() -> None:
    """EXTENSION_ID is what Chromium derives from the manifest's public key."""
    manifest = json.loads((harness.EXTENSION_DIR / "manifest.json").read_text())
    assert harness.extension_id_from_key(manifest["key"]) == harness.EXTENSION_ID


def test_extension_manifest_shape() -> None:
    """MV3, native messaging, a service worker, and pages on any localhost port."""
    manifest = json.loads((harness.EXTENSION_DIR / "manifest.json").read_text())
    assert manifest["manifest_version"] == 3
    assert "nativeMessaging" in manifest["permissions"]
    assert manifest["background"] == {"service_worker": "background.js"}
    assert manifest["externally_connectable"] == {"matches": ["http://localhost/*"]}
    assert (harness.EXTENSION_DIR / "background.js").is_file()
