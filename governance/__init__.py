"""govern: storage lifecycle governance for machine-learning training artifacts."""

__version__ = "0.1.0"
