"""Patroni: a managed PostgreSQL cluster per trial, whether Patroni can run here, and the router that follows its
health checks to the primary."""
