"""Tests of the identification flow: start, the three callbacks, the model, signals and admin."""
