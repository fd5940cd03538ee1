"""Bringing an engine up and down: process, attach, compose, preflight, GPU inventory, fingerprint."""
