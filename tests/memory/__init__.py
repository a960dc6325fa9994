"""Tests of the in-memory engine's own specifics (the shared behaviour lives in contract_tests/)."""
