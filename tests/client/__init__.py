"""Tests of the broker's client: its calls on the wire, errors, retries, deadline, tokens."""
