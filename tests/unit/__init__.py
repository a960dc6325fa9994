"""Unit tests of core's pure functions: names, spec grammar, boundary math, options, codec, time, errors."""
