"""The PostgreSQL engine (psycopg 3 + psycopg_pool)."""
