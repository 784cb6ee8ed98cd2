"""The migrations: each data migration on the rows it meets, and the model matched."""
