"""The ``runs-on`` labels of the project's benchmark runners, for the workflows.

``[self-hosted, <architecture>, <device name>]`` unless the project's ``runner-labels`` table names
others; ``matrix.jq`` applies the same default (docs/adopting.md, "The workflow").
"""

from __future__ import annotations

from benchtrail.project import Project


def default_labels(device_name: str, architecture: str) -> list[str]:
    """``[self-hosted, <architecture>, <device name>]``, as matrix.jq's default too."""
    return ["self-hosted", architecture, device_name]


def project_labels(project: Project) -> dict[str, list[str]]:
    """The project's ``runner-labels`` table as JSON-ready lists (``{}`` without one)."""
    return {device: list(labels) for device, labels in sorted(project.runner_labels.items())}


def device_labels(project: Project, device_name: str, architecture: str) -> list[str]:
    """The project's labels for ``device_name``, else :func:`default_labels`."""
    return project_labels(project).get(device_name) or default_labels(device_name, architecture)
