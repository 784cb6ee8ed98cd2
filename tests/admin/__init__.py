"""The admin of the identifications."""
