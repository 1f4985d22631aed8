"""Helpers for running real nsqbox servers inside test suites."""

from __future__ import annotations

from .thread import ThreadedNSQD

__all__ = ["ThreadedNSQD"]
