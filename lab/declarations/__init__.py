"""What a backend, a fault and a scenario declare about themselves, and the registries that load them:
the rest of the lab selects, applies and reports by these declarations alone."""
