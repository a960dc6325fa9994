"""Adapters: the engines behind ``alkstore.Engine`` (memory, postgres) and the command line."""
