"""pedelec-native-host: the Chrome Native Messaging host of Pedelec."""

__version__ = "0.1.0"

HOST_NAME = "cc.isaaclin.pedelec"
OFFICIAL_EXTENSION_ID = "ogccgaminlphbkeghldidiiimajfdpag"
