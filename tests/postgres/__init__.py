"""Tests of the Postgres engine's own specifics (the shared behaviour lives in contract_tests/)."""
