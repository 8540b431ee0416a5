"""spanassert."""
