"""Tests of the broker APIs (``django_eid.brokers``): the contract suite (the flow with each
API, ``test_contract.py``) and one package per API for what is its own (the wire, OIDC)."""
