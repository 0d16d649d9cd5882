"""Errors that experiments catch and record instead of crashing or silently skipping."""


class SCPError(Exception):
    """Base class for SCP's own errors."""


class DataUnavailableError(SCPError, FileNotFoundError):
    """A dataset could be found neither locally (path / SCP_DATA_DIR) nor on the Hugging Face hub."""


class ModelUnavailableError(SCPError, RuntimeError):
    """A model's weights cannot be loaded here (offline, or an optional package is missing).

    Experiments catch this and record the method as ``n/a`` with the message, never skip it silently.
    """
