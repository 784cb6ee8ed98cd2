"""The models: the identification row, its fields and queries."""
