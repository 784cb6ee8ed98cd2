"""Tests of the sandbox broker's wire layers (v2, eID Hub)."""
