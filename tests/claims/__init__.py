"""ONE_ACCOUNT_PER_PERSON: the person's claims and the rejection of a second account."""
