"""A stand-in for the identification broker, for laptops and tests."""
