"""pedelec-native-host: the Chrome Native Messaging host of Pedelec."""

__version__ = "0.1.0"

HOST_NAME = "cc.isaaclin.pedelec"
OFFICIAL_EXTENSION_ID = "ogccgaminlphbkeghldidiiimajfdpag"
RELEASES_URL = "https://github.com/kaoruisaac/pedelec-native-host/releases"
"""Where the built releases are downloaded (pyproject's [project.urls] names it too):
under the Pedelec project's own GitHub account (github.com/kaoruisaac/pedelec), where only
that account can create a repository, so no one else can serve a release at this address."""
