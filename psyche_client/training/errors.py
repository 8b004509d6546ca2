"""Errors of the training side that the client daemon handles (no torch import here)."""


class ModelUnavailable(RuntimeError):
    """This client cannot hold the run's current model: training would publish results from a
    diverged copy, so it must not take part."""
