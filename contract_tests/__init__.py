"""The contract suite: one set of tests, written against ``alkstore``'s public API, run on every engine."""
