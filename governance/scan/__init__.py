"""The scanner: listings into the catalog."""
