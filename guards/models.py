"""JWT guard policies (SPEC 4) live here."""
