"""Errors whose message is meant for the person at the keyboard.

Every error a user can cause (bad text, a broken checkpoint, an impossible
hyperparameter) is raised as a `LabError` subclass with a one-line message; the
CLI prints it and exits 2, the app shows it in a box. Anything else is a bug.
"""


class LabError(Exception):
    """A problem with the user's input, explained in plain words."""


class ConfigError(LabError, ValueError):
    """An invalid model or training setting; the message names the field."""


class CheckpointError(LabError):
    """A checkpoint folder that is missing, corrupt or not a BERT."""


class InputError(LabError, ValueError):
    """Text or options that cannot be processed as given."""


class DeviceError(LabError):
    """A device that was asked for but is not available."""


class GpuMemoryError(DeviceError):
    """A model that does not fit in the GPU's free memory; could_fit: it would, were the GPU's memory all free."""

    def __init__(self, message: str, could_fit: bool = True):
        super().__init__(message)
        self.could_fit = could_fit


class ExportError(LabError):
    """A chart that cannot be exported as asked (no browser to draw images with, a render that failed)."""
