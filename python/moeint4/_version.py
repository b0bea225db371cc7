"""The package version; its MAJOR.MINOR is checked against the loaded library."""
__version__ = "0.1.0"
