"""A user model unlike Django's: a UUID key in a column of another name, a table name with a
space. Installed only by tests/flow/test_custom_user_model.py's child interpreter."""
