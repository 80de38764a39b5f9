"""Reaching PostgreSQL: connection strings (read strictly, shown without secrets),
connections with a readable failure, and the embedded server of the demo and tests."""
