"""The loaded plan: the frozen tables the request path reads, the key book, and the credential checks a
plan passes at load."""
