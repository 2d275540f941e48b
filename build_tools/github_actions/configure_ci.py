#!/usr/bin/env python3
"""Seed-compatible setup step: ``configure_ci.py`` reads the GitHub event and selects presets.

A thin wrapper over ``benchtrail configure`` (same environment variables, same outputs).
"""

from __future__ import annotations

import sys

from benchtrail.cli import main

if __name__ == "__main__":
    sys.exit(main(["configure", *sys.argv[1:]]))
