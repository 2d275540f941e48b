"""The ``runs-on`` labels of the project's benchmark runners, for the workflows.

A device's runners carry the labels ``[self-hosted, <architecture>, <device name>]`` unless the
project's ``[tool.benchtrail] runner-labels`` (device name -> labels; ``benchtrail.project``) names
others. The setup job of ``.github/workflows/benchmark.yml`` prints them with ``benchtrail runner-labels``
(``benchtrail.cli.github``) and hands them to
``build_tools/github_actions/matrix.jq`` (``--argjson labels``), which applies the same default to
devices the table leaves out, and to the compile and process jobs' ``runs-on`` (docs/adopting.md,
"The workflow").

    benchtrail runner-labels          # {"laptop": ["self-hosted", "cpu", "laptop"]}
    benchtrail runner-labels --device laptop --architecture cpu   # ["self-hosted", "cpu", "laptop"]
"""

from __future__ import annotations

from benchtrail.project import Project


def default_labels(device_name: str, architecture: str) -> list[str]:
    """``[self-hosted, <architecture>, <device name>]``: the labels a device's runners carry by default.

    matrix.jq applies the same rule to the devices ``runner-labels`` leaves out.
    """
    return ["self-hosted", architecture, device_name]


def project_labels(project: Project) -> dict[str, list[str]]:
    """The project's ``runner-labels`` table as JSON-ready lists (``{}`` without one)."""
    return {device: list(labels) for device, labels in sorted(project.runner_labels.items())}


def device_labels(project: Project, device_name: str, architecture: str) -> list[str]:
    """The ``runs-on`` labels of ``device_name``'s runners: the project's, else :func:`default_labels`."""
    return project_labels(project).get(device_name) or default_labels(device_name, architecture)
