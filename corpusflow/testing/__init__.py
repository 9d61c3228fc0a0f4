"""Test suites shipped with the package, for its own tests and for new backends."""
